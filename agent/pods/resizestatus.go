package pods

import (
	"math"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"nodeagent/cgroups"
	"nodeagent/internal/qos"
)

// What a resize shows in the pod's status: the resources the runtime and
// the pod cgroup hold, beside what was allocated.

// statusResources is a container's status.resources, as the kubelet
// reports them: the allocation, with the values the runtime holds for a
// running container (and the kubelet's minimums: a CPU limit at or below
// 10m and a request at or below 2m read back as allocated).
func statusResources(alloc corev1.ResourceRequirements, rec *runtimeapi.ContainerStatus) *corev1.ResourceRequirements {
	out := alloc.DeepCopy()
	if rec == nil || rec.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		return out
	}
	l := rec.GetResources().GetLinux()
	if l == nil {
		return out
	}
	if out.Limits != nil {
		if l.CpuPeriod > 0 && l.CpuQuota > 0 {
			milli := l.CpuQuota * 1000 / l.CpuPeriod
			if milli > cgroups.MinMilliCPULimit || out.Limits.Cpu().MilliValue() > cgroups.MinMilliCPULimit {
				out.Limits[corev1.ResourceCPU] = *resource.NewMilliQuantity(milli, resource.DecimalSI)
			}
		}
		if l.MemoryLimitInBytes > 0 {
			out.Limits[corev1.ResourceMemory] = *resource.NewQuantity(l.MemoryLimitInBytes, resource.BinarySI)
		}
	}
	if out.Requests != nil && l.CpuShares >= cgroups.MinShares {
		milli := int64(math.Ceil(float64(l.CpuShares*1000) / 1024))
		if milli > cgroups.MinShares || out.Requests.Cpu().MilliValue() > cgroups.MinShares {
			out.Requests[corev1.ResourceCPU] = *resource.NewMilliQuantity(milli, resource.DecimalSI)
		}
	}
	return out
}

// podCgroupValues are the pod cgroup's values as the kernel holds them
// (the kubelet's GetPodCgroupConfig; nil without pod cgroups, what the
// allocation writes while the cgroup cannot be read). On v2 a weight the
// allocation's shares round-trip to reads as those shares, as the kubelet
// keeps the allocated request then.
func (w *worker) podCgroupValues() *cgroups.ResourceConfig {
	if _, ok := w.m.tree.PodCgroup(w.pod); !ok {
		return nil
	}
	written := w.m.tree.PodValues(w.pod)
	have, err := w.m.tree.PodCurrent(w.pod)
	v2 := w.m.tree.Version() == 2
	if err != nil || (v2 && have.CPUWeight == 0) || (!v2 && have.CPUShares == 0) {
		return written // unreadable, or the cpu controller is not there
	}
	rc := configOf(have, v2)
	if s := written.CPUShares; v2 && s != nil && cgroups.WeightToShares(cgroups.SharesToWeight(*s)) == *rc.CPUShares {
		rc.CPUShares = s
	}
	return rc
}

// podLevelStatus sets the pod's status.allocatedResources (its summed
// requests) and status.resources, as the kubelet does for every pod once
// pod-level resize is on: for a running pod, what its cgroup holds (cpu
// request from the shares, cpu limit from the quota, the memory limit, at
// the kernel's minimums the allocated value), else the summed spec. rc is
// what the pod cgroup holds (podCgroupValues), read only for a running pod.
func podLevelStatus(pod *corev1.Pod, st *corev1.PodStatus, read func() *cgroups.ResourceConfig) {
	requests, limits := qos.PodRequests(pod), qos.PodLimits(pod)
	if len(requests) > 0 {
		st.AllocatedResources = requests
	}
	var rc *cgroups.ResourceConfig
	if st.Phase == corev1.PodRunning && read != nil {
		rc = read()
	}
	if rc == nil {
		st.Resources = nonEmpty(&corev1.ResourceRequirements{Requests: requests, Limits: limits})
		return
	}
	out := &corev1.ResourceRequirements{Requests: corev1.ResourceList{}, Limits: corev1.ResourceList{}}
	if r := pod.Spec.Resources; r != nil && qos.PodLevelSet(pod) {
		out = r.DeepCopy()
		if out.Requests == nil {
			out.Requests = corev1.ResourceList{}
		}
		if out.Limits == nil {
			out.Limits = corev1.ResourceList{}
		}
	}
	if rc.CPUShares != nil {
		milli := int64(math.Ceil(float64(*rc.CPUShares*1000) / 1024))
		if milli > cgroups.MinShares || requests.Cpu().MilliValue() > cgroups.MinShares {
			out.Requests[corev1.ResourceCPU] = *resource.NewMilliQuantity(milli, resource.DecimalSI)
		}
	}
	if _, ok := out.Requests[corev1.ResourceMemory]; !ok && !requests.Memory().IsZero() {
		out.Requests[corev1.ResourceMemory] = requests.Memory().DeepCopy()
	}
	if rc.CPUQuota != nil && rc.CPUPeriod != nil && *rc.CPUQuota > 0 && *rc.CPUPeriod > 0 {
		milli := *rc.CPUQuota * 1000 / int64(*rc.CPUPeriod)
		if milli > cgroups.MinMilliCPULimit || limits.Cpu().MilliValue() > cgroups.MinMilliCPULimit {
			out.Limits[corev1.ResourceCPU] = *resource.NewMilliQuantity(milli, resource.DecimalSI)
		}
	}
	if rc.Memory != nil && *rc.Memory > 0 {
		out.Limits[corev1.ResourceMemory] = *resource.NewQuantity(*rc.Memory, resource.BinarySI)
	}
	st.Resources = nonEmpty(out)
}

// nonEmpty drops empty lists, and the whole when both are.
func nonEmpty(r *corev1.ResourceRequirements) *corev1.ResourceRequirements {
	if len(r.Requests) == 0 {
		r.Requests = nil
	}
	if len(r.Limits) == 0 {
		r.Limits = nil
	}
	if r.Requests == nil && r.Limits == nil {
		return nil
	}
	return r
}
