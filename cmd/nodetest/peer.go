package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"nodeagent/e2e/launch"
)

// peerOptions are nodetest peer kubelet's flags.
type peerOptions struct {
	dir, kubeconfig, node, address, rootDir, podLogsDir, nodeIP, configFile, cgroupRoot string
	unit, unitConfig                                                                    string
	port, readOnlyPort, healthzPort                                                     int
}

// runKubeletPeer runs the real kubelet on a containerd of its own in the
// foreground, for scripts (the upstream suite's control run): it prints
// the kubelet's CRI endpoint once healthy, and on SIGTERM or Ctrl-C stops
// both and puts the host back as the launcher does.
func (t *tester) runKubeletPeer(o peerOptions, e experimentOptions) error {
	if o.dir == "" {
		return fmt.Errorf("nodetest peer kubelet: --dir is required")
	}
	if o.unitConfig != "" && o.unit == "" {
		return fmt.Errorf("nodetest peer kubelet: --unit-config needs --unit")
	}
	kubeletBin, runtimeBin := besideNodetest(e.kubeletBin, "upstream/kubelet"), besideNodetest(e.runtimeBin, "runtime")
	extra := ""
	if o.configFile != "" {
		b, err := os.ReadFile(o.configFile)
		if err != nil {
			return err
		}
		extra = string(b)
	}
	var args []string
	if o.nodeIP != "" {
		args = append(args, "--node-ip", o.nodeIP)
	}
	k, err := launch.NewKubelet(launch.KubeletOptions{Bin: kubeletBin, RuntimeBin: runtimeBin, Dir: o.dir, NodeName: o.node,
		Registry: envOr("REGISTRY", "127.0.0.1:5050"), PauseImage: envOr("PAUSE_IMAGE", "127.0.0.1:5050/nodeagent/pause:1.0"), Kubeconfig: o.kubeconfig, Address: o.address, Port: o.port,
		ReadOnlyPort: o.readOnlyPort, HealthzPort: o.healthzPort, RootDir: o.rootDir, CgroupRoot: o.cgroupRoot, PodLogsDir: o.podLogsDir, Args: args, Config: extra,
		Unit: o.unit, UnitConfig: o.unitConfig})
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := k.Start(ctx, 2*time.Minute); err != nil {
		return err
	}
	fmt.Fprintf(t.out, "KUBELET_CRI_ENDPOINT=%s\nKUBELET_LOG=%s\n", k.Runtime.Endpoint(), k.LogPath())
	select {
	case <-ctx.Done():
	case <-k.Exited():
		fmt.Fprintf(os.Stderr, "nodetest: the kubelet exited; log %s\n", k.LogPath())
	}
	return k.Stop()
}
