package criconfig

import (
	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"nodeagent/cgroups"
	"nodeagent/internal/qos"
	"nodeagent/internal/sat"
)

// What the runtime is told of a pod's resources at RunPodSandbox and
// UpdatePodSandboxResources (for NRI plugins and runtimes that size the
// sandbox): the pod's resources without its overhead, and the overhead
// apart, as the kubelet's applySandboxResources.

// SandboxOverhead is the pod's overhead as a Guaranteed container's
// resources (convertOverheadToLinuxResources); empty without one.
func (b *Builder) SandboxOverhead(pod *corev1.Pod) *runtimeapi.LinuxContainerResources {
	if pod.Spec.Overhead == nil {
		return &runtimeapi.LinuxContainerResources{}
	}
	cpu := sat.MilliValue(*pod.Spec.Overhead.Cpu())
	return b.linuxResources(cpu, cpu, sat.Value(*pod.Spec.Overhead.Memory()), false)
}

// SandboxResources are the pod's summed requests and limits, pod level
// included and overhead excluded (calculateSandboxResources); no CFS
// quota when a container has exclusive CPUs.
func (b *Builder) SandboxResources(pod *corev1.Pod) *runtimeapi.LinuxContainerResources {
	bare := *pod
	bare.Spec.Overhead = nil
	req, lim := qos.PodRequests(&bare), qos.PodLimits(&bare)
	cpuReq, cpuLim := sat.MilliValue(*req.Cpu()), sat.MilliValue(*lim.Cpu())
	if _, set := req[corev1.ResourceCPU]; !set {
		cpuReq = cpuLim // the kubelet's request-defaults-to-limit
	}
	return b.linuxResources(cpuReq, cpuLim, sat.Value(*lim.Memory()), b.hasExclusiveCPUs(pod))
}

// linuxResources is the kubelet's calculateLinuxResources.
func (b *Builder) linuxResources(cpuReq, cpuLim, memLim int64, noQuota bool) *runtimeapi.LinuxContainerResources {
	r := &runtimeapi.LinuxContainerResources{CpuShares: int64(cgroups.MilliCPUToShares(cpuReq)), MemoryLimitInBytes: memLim}
	if b.opts.EnforceCPULimits {
		period := int64(b.opts.CPUPeriod)
		if period == 0 {
			period = cgroups.QuotaPeriod
		}
		r.CpuPeriod, r.CpuQuota = period, cgroups.MilliCPUToQuota(cpuLim, period)
		if noQuota {
			r.CpuQuota = -1
		}
	}
	if b.opts.OOMGroupKill {
		r.Unified = map[string]string{"memory.oom.group": "1"}
	}
	return r
}

func (b *Builder) hasExclusiveCPUs(pod *corev1.Pod) bool {
	if b.opts.CPUs == nil {
		return false
	}
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			if _, exclusive := b.opts.CPUs.CPUs(pod.UID, cs[i].Name); exclusive {
				return true
			}
		}
	}
	return false
}

// WithoutOverhead takes the pod's overhead out of its pod cgroup's values
// (the kubelet's subtractOverheadFromResourceConfig, which leaves no
// limit and the minimums as they are).
func WithoutOverhead(rc *cgroups.ResourceConfig, pod *corev1.Pod) *cgroups.ResourceConfig {
	out := *rc
	if pod.Spec.Overhead == nil {
		return &out
	}
	if cpu := sat.MilliValue(*pod.Spec.Overhead.Cpu()); cpu > 0 {
		if rc.CPUQuota != nil && *rc.CPUQuota > 0 && rc.CPUPeriod != nil {
			q := max(*rc.CPUQuota-cgroups.MilliCPUToQuota(cpu, int64(*rc.CPUPeriod)), cgroups.MinQuotaPeriod)
			out.CPUQuota = &q
		}
		if rc.CPUShares != nil {
			s := cgroups.MilliCPUToShares(cgroups.SharesToMilliCPU(*rc.CPUShares) - cpu)
			out.CPUShares = &s
		}
	}
	if mem := sat.Value(*pod.Spec.Overhead.Memory()); mem > 0 && rc.Memory != nil && *rc.Memory > 0 {
		m := max(*rc.Memory-mem, 0)
		out.Memory = &m
	}
	return &out
}
