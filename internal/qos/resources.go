package qos

import (
	corev1 "k8s.io/api/core/v1"
)

// PodRequests sums a pod's requests as the kubelet and scheduler do: regular
// containers and sidecars (restartable init containers) run together and add
// up; each regular init container runs alone beside the sidecars started
// before it, so the pod needs the larger of the two; pod overhead is added.
func PodRequests(pod *corev1.Pod) corev1.ResourceList {
	return podSum(pod, func(c *corev1.Container) corev1.ResourceList { return c.Resources.Requests })
}

// PodLimits sums a pod's limits with the same rules as PodRequests. A
// resource that some container leaves unlimited is still summed over the
// containers that set it; callers that need "every container has a limit"
// check that separately (see AllHaveLimit).
func PodLimits(pod *corev1.Pod) corev1.ResourceList {
	return podSum(pod, func(c *corev1.Container) corev1.ResourceList { return c.Resources.Limits })
}

func podSum(pod *corev1.Pod, get func(*corev1.Container) corev1.ResourceList) corev1.ResourceList {
	total := corev1.ResourceList{}
	for i := range pod.Spec.Containers {
		addList(total, get(&pod.Spec.Containers[i]))
	}
	sidecars := corev1.ResourceList{}
	initPeak := corev1.ResourceList{}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		var running corev1.ResourceList
		if IsSidecar(c) {
			addList(total, get(c))
			addList(sidecars, get(c))
			running = sidecars.DeepCopy()
		} else {
			running = sidecars.DeepCopy()
			addList(running, get(c))
		}
		maxList(initPeak, running)
	}
	maxList(total, initPeak)
	addList(total, pod.Spec.Overhead)
	return total
}

// AllHaveLimit reports whether every container of the pod, init containers
// included, sets a positive limit for name.
func AllHaveLimit(pod *corev1.Pod, name corev1.ResourceName) bool {
	for _, c := range allContainers(pod) {
		if q, ok := c.Resources.Limits[name]; !ok || q.Sign() <= 0 {
			return false
		}
	}
	return true
}

// IsSidecar reports whether c is a restartable init container.
func IsSidecar(c *corev1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
}

func addList(dst, src corev1.ResourceList) {
	for name, q := range src {
		add(dst, name, q)
	}
}

func maxList(dst, src corev1.ResourceList) {
	for name, q := range src {
		if cur, ok := dst[name]; !ok || q.Cmp(cur) > 0 {
			dst[name] = q.DeepCopy()
		}
	}
}
