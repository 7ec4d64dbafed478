package agent

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"nodeagent/network"
)

// podCIDRWait is how long a joined node waits for the control plane to
// give it pod CIDRs (the node IPAM controller does within a second) before
// it takes the config's podCIDR.
const podCIDRWait = 10 * time.Second

// podNetwork keeps the runtime's CNI configuration for the node's pod
// CIDRs and tells the runtime which they are (the kubelet's
// updatePodCIDR). Standalone, they are the config's podCIDR; in API-server
// mode the Node's spec.podCIDRs, else the config's once podCIDRWait passed
// after joining. Problems are logged and show in the node's Ready
// condition (through the runtime's NetworkReady); they do not stop the
// agent.
type podNetwork struct {
	confDir string
	binDirs []string
	rt      Runtime
	clock   clock.PassiveClock
	log     *slog.Logger

	applied string    // the CIDRs the runtime was last told
	lastErr string    // logged once until it changes
	joined  time.Time // when the Node was first seen; zero before
	retryAt time.Time // after a failure: no new attempt before (each validates the plugins by running them)
}

// networkRetry is how long a failed configuration waits for its next try.
const networkRetry = 30 * time.Second

// newPodNetwork finds the CNI directories: the options', else what the
// runtime reports in its verbose status, else the usual ones.
func newPodNetwork(opts Options, info map[string]string, rt Runtime, log *slog.Logger) *podNetwork {
	confDir, binDirs := opts.CNIConfDir, opts.CNIBinDirs
	var rc struct {
		CNI struct {
			ConfDir string   `json:"confDir"`
			BinDirs []string `json:"binDirs"` // containerd 2
			BinDir  string   `json:"binDir"`  // containerd 1.x
		} `json:"cni"`
	}
	if err := json.Unmarshal([]byte(info["config"]), &rc); err == nil {
		if confDir == "" {
			confDir = rc.CNI.ConfDir
		}
		if len(binDirs) == 0 {
			binDirs = rc.CNI.BinDirs
		}
		if len(binDirs) == 0 && rc.CNI.BinDir != "" {
			binDirs = []string{rc.CNI.BinDir}
		}
	}
	if confDir == "" {
		confDir = "/etc/cni/net.d"
	}
	if len(binDirs) == 0 {
		binDirs = []string{"/opt/cni/bin", "/usr/lib/cni"}
	}
	return &podNetwork{confDir: confDir, binDirs: binDirs, rt: rt, clock: opts.Clock, log: log}
}

// follow configures the network for the Node's pod CIDRs, or the
// fallback once the Node went podCIDRWait without any.
func (n *podNetwork) follow(ctx context.Context, node *corev1.Node, fallback string) {
	if node == nil {
		return
	}
	cidrs := strings.Join(node.Spec.PodCIDRs, ",")
	if cidrs == "" {
		cidrs = node.Spec.PodCIDR
	}
	if cidrs == "" {
		now := n.clock.Now()
		if n.joined.IsZero() {
			n.joined = now
		}
		if now.Sub(n.joined) < podCIDRWait {
			return
		}
		cidrs = fallback
	}
	if cidrs != n.applied && !n.clock.Now().Before(n.retryAt) {
		n.ensure(ctx, cidrs)
	}
}

// ensure writes or checks the configuration for cidrs (empty: checks what
// is there, writes nothing) and tells the runtime the CIDRs.
func (n *podNetwork) ensure(ctx context.Context, cidrs string) {
	res, err := network.Ensure(ctx, n.confDir, n.binDirs, cidrs)
	if err != nil {
		n.retryAt = n.clock.Now().Add(networkRetry)
		if err.Error() != n.lastErr {
			n.lastErr = err.Error()
			n.log.Error("pod network configuration", "err", err)
		}
		return
	}
	n.lastErr = ""
	switch {
	case res.Written && res.Replaced != "":
		n.log.Warn("pod network moved to new pod CIDRs; pods started before keep their old addresses until they are recreated",
			"file", res.File, "from", res.Replaced, "to", cidrs)
	case res.Written:
		n.log.Info("wrote pod network configuration", "file", res.File, "network", res.Name, "podCIDRs", cidrs)
	case res.File == "":
		n.log.Info("no pod network configuration yet: it is written once the Node's pod CIDRs are known", "dir", n.confDir)
	default:
		n.log.Info("using existing pod network configuration", "file", res.File, "network", res.Name)
	}
	if cidrs == "" {
		return
	}
	if err := n.rt.UpdatePodCIDR(ctx, cidrs); err != nil {
		n.retryAt = n.clock.Now().Add(networkRetry)
		if err.Error() != n.lastErr {
			n.lastErr = err.Error()
			n.log.Warn("the runtime was not told the pod CIDRs; retrying", "podCIDRs", cidrs, "err", err)
		}
		return
	}
	n.applied = cidrs
	n.log.Info("pod CIDRs in effect", "podCIDRs", cidrs)
}
