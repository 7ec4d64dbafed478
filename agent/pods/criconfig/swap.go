package criconfig

import (
	"strconv"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"nodeagent/internal/qos"
)

// SwapOptions are how containers may use the node's swap
// (memorySwap.swapBehavior), as the kubelet's swap configuration helper.
type SwapOptions struct {
	// Limited is LimitedSwap: Burstable containers get a share of swap by
	// their memory request; else NoSwap.
	Limited bool
	// Controller: the memory cgroup limits swap (memory.swap.max on v2,
	// memory.memsw.* on v1). Without it nothing is set.
	Controller bool
	CgroupV2   bool
	// Capacity is the node's swap (SwapTotal).
	Capacity int64
}

// systemCriticalPriority is the priority of system-cluster-critical and
// above (the kubelet's IsCriticalPod threshold).
const systemCriticalPriority = 2_000_000_000

// ContainerSwap is the swap the container may use under LimitedSwap, and
// whether LimitedSwap applies to it at all: only a container of a
// Burstable, non-critical pod on cgroup v2 whose memory request is set and
// differs from its limit; static pods count as critical.
func (o SwapOptions) ContainerSwap(pod *corev1.Pod, c *corev1.Container, memoryCapacity int64) (bytes int64, limited bool) {
	if !o.Limited || !o.Controller || !o.CgroupV2 || isCritical(pod) || (pod.Spec.Priority != nil && *pod.Spec.Priority >= systemCriticalPriority) {
		return 0, false
	}
	request, limit := c.Resources.Requests.Memory(), c.Resources.Limits.Memory()
	if qos.Class(pod) != corev1.PodQOSBurstable || (request.IsZero() && limit.IsZero()) || request.Cmp(*limit) == 0 {
		return 0, false
	}
	if memoryCapacity <= 0 || request.Value() > memoryCapacity {
		return 0, false // the kubelet disallows swap when it cannot compute it
	}
	return int64(float64(request.Value()) / float64(memoryCapacity) * float64(o.Capacity)), true
}

// setSwap writes the container's swap limit: its LimitedSwap share, else
// none (memory.swap.max 0 on v2; on v1 the memory+swap limit equals the
// memory limit).
func (b *Builder) setSwap(r *runtimeapi.LinuxContainerResources, pod *corev1.Pod, c *corev1.Container) {
	o := b.opts.Swap
	if !o.Controller {
		return
	}
	if !o.CgroupV2 {
		r.MemorySwapLimitInBytes = r.MemoryLimitInBytes
		return
	}
	bytes, _ := o.ContainerSwap(pod, c, b.opts.MemoryCapacity)
	if r.Unified == nil {
		r.Unified = map[string]string{}
	}
	r.Unified["memory.swap.max"] = strconv.FormatInt(bytes, 10)
}
