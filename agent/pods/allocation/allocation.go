// Package allocation keeps, per pod, the resources its containers were
// admitted with (the kubelet's allocated_pods_state) and the resources last
// applied to its cgroups and the runtime (actuated_pods_state). An in-place
// resize moves the first at admission and the second step by step as it is
// applied, so an agent restarted or killed mid-resize knows what it granted
// and how far it got.
package allocation

import (
	corev1 "k8s.io/api/core/v1"
)

// Resources is what one pod holds: each container's requirements by name
// (init containers included) and the pod-level ones, if any. The JSON
// names are the kubelet's (PodResourceInfo), so each reads the other's
// checkpoint.
type Resources struct {
	Containers map[string]corev1.ResourceRequirements `json:"ContainerResources,omitempty"`
	Pod        *corev1.ResourceRequirements           `json:"PodLevelResources,omitempty"`
}

// resizable are the resources an in-place resize may change.
var resizable = []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory}

// Of is what the pod's spec asks for, as it would be admitted.
func Of(pod *corev1.Pod) Resources {
	r := Resources{Containers: map[string]corev1.ResourceRequirements{}}
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			r.Containers[cs[i].Name] = *cs[i].Resources.DeepCopy()
		}
	}
	if pod.Spec.Resources != nil {
		r.Pod = pod.Spec.Resources.DeepCopy()
	}
	return r
}

// Equal compares the resizable resources by value (500m equals 0.5).
func (r Resources) Equal(o Resources) bool {
	if len(r.Containers) != len(o.Containers) || !sameRequirements(r.Pod, o.Pod) {
		return false
	}
	for name, a := range r.Containers {
		b, ok := o.Containers[name]
		if !ok || !sameRequirements(&a, &b) {
			return false
		}
	}
	return true
}

func sameRequirements(a, b *corev1.ResourceRequirements) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return sameList(a.Requests, b.Requests) && sameList(a.Limits, b.Limits)
}

func sameList(a, b corev1.ResourceList) bool {
	for _, name := range resizable {
		qa, oka := a[name]
		qb, okb := b[name]
		if oka != okb || (oka && qa.Cmp(qb) != 0) {
			return false
		}
	}
	return true
}

// Apply returns a copy of pod whose containers and pod-level resources are
// r's: what the worker runs once a resize is admitted. Containers r does
// not know keep their spec.
func (r Resources) Apply(pod *corev1.Pod) *corev1.Pod {
	out := pod.DeepCopy()
	for _, cs := range [][]corev1.Container{out.Spec.InitContainers, out.Spec.Containers} {
		for i := range cs {
			if got, ok := r.Containers[cs[i].Name]; ok {
				cs[i].Resources = *got.DeepCopy()
			}
		}
	}
	// Pod-level resources a deferred resize adds are not the pod's yet.
	out.Spec.Resources = r.Pod.DeepCopy()
	return out
}
