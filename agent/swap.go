package agent

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"nodeagent/agent/pods/criconfig"
)

// swapOn reports whether the host has swap on: /proc/swaps lists a device
// under its header (the kubelet's IsSwapOn). A missing file is no swap.
func swapOn(path string) (bool, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return len(strings.Split(strings.TrimSpace(string(b)), "\n")) > 1, nil
}

// swapOptions checks failSwapOn and memorySwap at start as the kubelet does
// (swap on with failSwapOn refuses to start; LimitedSwap needs cgroup v2)
// and returns how containers may swap.
func (a *Agent) swapOptions(p *parts) (criconfig.SwapOptions, error) {
	on, err := swapOn("/proc/swaps")
	if err != nil {
		return criconfig.SwapOptions{}, fmt.Errorf("failed to determine if swap is on: %w", err)
	}
	if on && a.cfg.FailOnSwap() {
		return criconfig.SwapOptions{}, errors.New("running with swap on is not supported, please disable swap or set failSwapOn to false")
	}
	v2 := p.mgr.Version() == 2
	if a.cfg.LimitedSwap() && !v2 {
		return criconfig.SwapOptions{}, errors.New("memorySwap.swapBehavior: LimitedSwap is only supported with cgroup v2")
	}
	// The swap controller, seen in the kubepods cgroup (the root has no
	// memory.swap.max).
	file := "memory.memsw.limit_in_bytes"
	if v2 {
		file = "memory.swap.max"
	}
	_, err = os.Stat(filepath.Join(p.mgr.Path(p.tree.Kubepods()), file))
	o := criconfig.SwapOptions{Limited: a.cfg.LimitedSwap(), Controller: err == nil, CgroupV2: v2, Capacity: p.machine.SwapBytes}
	if o.Limited {
		a.log.Info("LimitedSwap: Burstable containers get a share of swap by their memory request", "swap", p.machine.SwapBytes, "controller", o.Controller)
	}
	return o, nil
}
