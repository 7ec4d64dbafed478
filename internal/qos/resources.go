package qos

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// PodRequests sums a pod's requests as the kubelet and scheduler do: regular
// containers and sidecars (restartable init containers) run together and add
// up; each regular init container runs alone beside the sidecars started
// before it, so the pod needs the larger of the two. A resource set at pod
// level (cpu, memory, hugepages) is the pod's value instead. Pod overhead
// is added.
func PodRequests(pod *corev1.Pod) corev1.ResourceList {
	total := ContainerRequests(pod)
	if PodLevelSet(pod) {
		podLevel(total, pod.Spec.Resources.Requests)
	}
	addList(total, pod.Spec.Overhead)
	return total
}

// ContainerRequests are the containers' summed requests (PodRequests
// without the pod level and the overhead).
func ContainerRequests(pod *corev1.Pod) corev1.ResourceList {
	return podSum(pod, func(c *corev1.Container) corev1.ResourceList { return c.Resources.Requests })
}

// PodLimits sums a pod's limits with the same rules as PodRequests. A
// resource that some container leaves unlimited is still summed over the
// containers that set it; callers that need "every container has a limit"
// check that separately (see AllHaveLimit).
func PodLimits(pod *corev1.Pod) corev1.ResourceList {
	total := podSum(pod, func(c *corev1.Container) corev1.ResourceList { return c.Resources.Limits })
	if PodLevelSet(pod) {
		podLevel(total, pod.Spec.Resources.Limits)
	}
	addList(total, pod.Spec.Overhead)
	return total
}

// PodLevelSet reports whether the pod sets pod-level resources the node
// honours (the kubelet's IsPodLevelResourcesSet): cpu, memory or hugepages
// in spec.resources' requests or limits.
func PodLevelSet(pod *corev1.Pod) bool {
	r := pod.Spec.Resources
	if r == nil {
		return false
	}
	for _, list := range []corev1.ResourceList{r.Requests, r.Limits} {
		for name := range list {
			if podLevelResource(name) {
				return true
			}
		}
	}
	return false
}

// PodLimit is the pod-level limit of name, zero when unset.
func PodLimit(pod *corev1.Pod, name corev1.ResourceName) resource.Quantity {
	if !PodLevelSet(pod) {
		return resource.Quantity{}
	}
	return pod.Spec.Resources.Limits[name]
}

func podLevelResource(name corev1.ResourceName) bool {
	return name == corev1.ResourceCPU || name == corev1.ResourceMemory || strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix)
}

// podLevel replaces the totals of the resources set at pod level.
func podLevel(total, pod corev1.ResourceList) {
	for name, q := range pod {
		if podLevelResource(name) {
			total[name] = q.DeepCopy()
		}
	}
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
	return total
}

// AllHaveLimit reports whether the pod's cgroup is limited in name: a
// positive pod-level limit, or one on every container, init containers
// included (the kubelet's cpuLimitsDeclared/memoryLimitsDeclared).
func AllHaveLimit(pod *corev1.Pod, name corev1.ResourceName) bool {
	if q := PodLimit(pod, name); q.Sign() > 0 {
		return true
	}
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
