package agent

import (
	"errors"
	"fmt"
	"log/slog"

	"k8s.io/component-helpers/node/util/sysctl"
)

// kernelTunables are the kernel settings the kubelet's container manager
// wants at start (cm.setupKernelTunables): memory overcommitted always (a
// container's large allocation succeeds, and its cgroup limit, not the
// heuristic, decides what it may use), the OOM killer rather than a panic
// on OOM, a reboot 10 s after a panic, a panic on an oops, and room for
// the root user's keys.
var kernelTunables = []struct {
	name  string
	value int
}{
	{sysctl.VMOvercommitMemory, sysctl.VMOvercommitMemoryAlways},
	{sysctl.VMPanicOnOOM, sysctl.VMPanicOnOOMInvokeOOMKiller},
	{sysctl.KernelPanic, sysctl.KernelPanicRebootTimeout},
	{sysctl.KernelPanicOnOops, sysctl.KernelPanicOnOopsAlways},
	{sysctl.RootMaxKeys, sysctl.RootMaxKeysSetting},
	{sysctl.RootMaxBytes, sysctl.RootMaxBytesSetting},
}

// setupKernelTunables writes the kubelet's kernel settings, or with
// protectKernelDefaults refuses to start while one differs, as the kubelet.
func setupKernelTunables(s sysctl.Interface, protect bool, log *slog.Logger) error {
	var errs []error
	for _, t := range kernelTunables {
		have, err := s.GetSysctl(t.name)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("read kernel flag %s: %w", t.name, err))
		case have == t.value:
		case protect:
			errs = append(errs, fmt.Errorf("invalid kernel flag: %s, expected value: %d, actual value: %d (protectKernelDefaults is true: set it on the host, or leave protectKernelDefaults false for nodeagent to set it)", t.name, t.value, have))
		default:
			if err := s.SetSysctl(t.name, t.value); err != nil {
				errs = append(errs, fmt.Errorf("set kernel flag %s to %d (it is %d): %w", t.name, t.value, have, err))
				continue
			}
			log.Info("updated kernel flag", "flag", t.name, "value", t.value, "was", have)
		}
	}
	return errors.Join(errs...)
}
