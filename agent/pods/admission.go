package pods

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"nodeagent/internal/qos"
	"nodeagent/internal/sat"
)

// Rejection is why a pod was not admitted, in the kubelet's words.
type Rejection struct {
	Reason  string // OutOfpods, OutOfcpu, OutOfmemory, OutOfephemeral-storage
	Message string
}

// admit checks pod against what the admitted pods already use, as the
// kubelet's resource predicate does: the pod count against maxPods, and
// each requested resource against allocatable (capacity minus reservations
// and the hard eviction threshold).
func admit(pod *corev1.Pod, admitted []*corev1.Pod, maxPods int, allocatable corev1.ResourceList) *Rejection {
	if len(admitted)+1 > maxPods {
		return &Rejection{Reason: "OutOfpods", Message: fmt.Sprintf(
			"Node didn't have enough resource: pods, requested: 1, used: %d, capacity: %d", len(admitted), maxPods)}
	}
	requested := qos.PodRequests(pod)
	used := corev1.ResourceList{}
	for _, p := range admitted {
		for name, q := range qos.PodRequests(p) {
			sum := used[name]
			sum.Add(q)
			used[name] = sum
		}
	}
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage} {
		req, capacity := requested[name], allocatable[name]
		if req.IsZero() || capacity.IsZero() {
			continue
		}
		r, u, c := amount(name, req), amount(name, used[name]), amount(name, capacity)
		if sat.Add(r, u) > c {
			return &Rejection{Reason: "OutOf" + string(name), Message: fmt.Sprintf(
				"Node didn't have enough resource: %s, requested: %d, used: %d, capacity: %d", name, r, u, c)}
		}
	}
	return nil
}

// amount is the unit the kubelet reports in: milli-CPU for cpu, else bytes.
func amount(name corev1.ResourceName, q resource.Quantity) int64 {
	if name == corev1.ResourceCPU {
		return sat.MilliValue(q)
	}
	return sat.Value(q)
}
