package qos

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// computeResources are the resources that decide the QoS class.
var computeResources = []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory}

func isComputeResource(name corev1.ResourceName) bool {
	return name == corev1.ResourceCPU || name == corev1.ResourceMemory
}

// Class returns the pod's QoS class exactly as the kubelet derives it
// (GetPodQOS): BestEffort when no container has a cpu or memory request or
// limit; Guaranteed when every container (init containers included) has cpu
// and memory limits equal to its requests; Burstable otherwise. It expects a
// defaulted pod (requests default to limits). A pod with pod-level
// resources is classed by them alone (1.37 with PodLevelResourcesFix-
// KubeletQOSClass: an empty spec.resources falls back to the containers).
func Class(pod *corev1.Pod) corev1.PodQOSClass {
	if PodLevelSet(pod) {
		return requirementsClass(pod.Spec.Resources)
	}
	requests := corev1.ResourceList{}
	limits := corev1.ResourceList{}
	guaranteed := true
	for _, c := range allContainers(pod) {
		for name, q := range c.Resources.Requests {
			if isComputeResource(name) && q.Sign() > 0 {
				add(requests, name, q)
			}
		}
		found := 0
		for name, q := range c.Resources.Limits {
			if isComputeResource(name) && q.Sign() > 0 {
				add(limits, name, q)
				found++
			}
		}
		if found < len(computeResources) {
			guaranteed = false
		}
	}
	if len(requests) == 0 && len(limits) == 0 {
		return corev1.PodQOSBestEffort
	}
	if guaranteed {
		for name, req := range requests {
			if lim, ok := limits[name]; !ok || lim.Cmp(req) != 0 {
				guaranteed = false
				break
			}
		}
	}
	if guaranteed && len(requests) == len(limits) {
		return corev1.PodQOSGuaranteed
	}
	return corev1.PodQOSBurstable
}

func allContainers(pod *corev1.Pod) []corev1.Container {
	all := make([]corev1.Container, 0, len(pod.Spec.InitContainers)+len(pod.Spec.Containers))
	all = append(all, pod.Spec.InitContainers...)
	return append(all, pod.Spec.Containers...)
}

func add(list corev1.ResourceList, name corev1.ResourceName, q resource.Quantity) {
	sum := list[name]
	sum.Add(q)
	list[name] = sum
}

// requirementsClass is the class of one set of requirements over cpu and
// memory (the kubelet's requirementsQOS): Guaranteed when both have
// request == limit > 0, BestEffort when neither is set, else Burstable.
func requirementsClass(r *corev1.ResourceRequirements) corev1.PodQOSClass {
	guaranteed, bestEffort := true, true
	for _, name := range computeResources {
		req, lim := r.Requests[name], r.Limits[name]
		switch {
		case req.Cmp(lim) != 0:
			return corev1.PodQOSBurstable
		case req.IsZero():
			guaranteed = false
		default:
			bestEffort = false
		}
	}
	switch {
	case guaranteed:
		return corev1.PodQOSGuaranteed
	case bestEffort:
		return corev1.PodQOSBestEffort
	}
	return corev1.PodQOSBurstable
}
