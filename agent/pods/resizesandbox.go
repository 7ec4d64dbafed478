package pods

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"nodeagent/agent/pods/criconfig"
	"nodeagent/cgroups"
)

// resizePod writes one resource of the pod cgroup, telling the runtime
// first (UpdatePodSandboxResources; a runtime without it is fine) what
// the pod cgroup will hold, without the overhead, and the overhead apart.
// A cgroup write that fails tells the runtime the values it had back, as
// the kubelet's doPodResizeAction.
func (w *worker) resizePod(ctx context.Context, pod *corev1.Pod, sandboxID string, pr *podResize, which corev1.ResourceName) error {
	if !pr.perPodCgs {
		return nil
	}
	rc, next := &cgroups.ResourceConfig{}, *pr.current
	if which == corev1.ResourceMemory {
		rc.Memory, next.Memory = pr.want.Memory, pr.want.Memory
	} else {
		rc.CPUShares, rc.CPUQuota, rc.CPUPeriod = pr.want.CPUShares, pr.want.CPUQuota, pr.want.CPUPeriod
		next.CPUShares, next.CPUQuota, next.CPUPeriod = rc.CPUShares, rc.CPUQuota, rc.CPUPeriod
	}
	overhead := w.m.configs.SandboxOverhead(pod)
	tell := func(rc *cgroups.ResourceConfig) error {
		err := w.m.rt.UpdatePodSandboxResources(ctx, sandboxID, overhead, sandboxResources(criconfig.WithoutOverhead(rc, pod)))
		if err != nil && !notImplemented(err) {
			return err
		}
		return nil
	}
	if err := tell(&next); err != nil {
		return fmt.Errorf("failed to notify runtime for UpdatePodSandboxResources (resource=%s); resize rejected: %w", which, err)
	}
	if err := w.m.tree.UpdatePod(pod, rc); err != nil {
		if rerr := tell(pr.current); rerr != nil {
			w.log.Warn("runtime not told the pod's resources back after a failed resize", "resource", which, "err", rerr)
		}
		return fmt.Errorf("update pod cgroup %s: %w", which, err)
	}
	pr.current = &next
	return nil
}

// configOf is a pod cgroup's values as the config that would write them
// (the kubelet's GetPodCgroupConfig): v2's weight as shares, no memory
// limit as none.
func configOf(have cgroups.Values, v2 bool) *cgroups.ResourceConfig {
	shares, quota, period, memory := have.CPUShares, have.CPUQuota, have.CPUPeriod, have.MemoryLimit
	if v2 {
		shares = cgroups.WeightToShares(have.CPUWeight)
	}
	rc := &cgroups.ResourceConfig{CPUShares: &shares, CPUQuota: &quota, CPUPeriod: &period}
	if memory >= 0 {
		rc.Memory = &memory
	}
	return rc
}

func sandboxResources(rc *cgroups.ResourceConfig) *runtimeapi.LinuxContainerResources {
	r := &runtimeapi.LinuxContainerResources{}
	if rc.CPUShares != nil {
		r.CpuShares = int64(*rc.CPUShares)
	}
	if rc.CPUQuota != nil {
		r.CpuQuota = *rc.CPUQuota
	}
	if rc.CPUPeriod != nil {
		r.CpuPeriod = int64(*rc.CPUPeriod)
	}
	if rc.Memory != nil {
		r.MemoryLimitInBytes = *rc.Memory
	}
	return r
}
