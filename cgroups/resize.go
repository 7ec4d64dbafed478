package cgroups

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
)

// PodValues are the values the pod's cgroup should hold for its spec
// (PodConfig with the node's options).
func (t *Tree) PodValues(pod *corev1.Pod) *ResourceConfig { return PodConfig(pod, t.cfg.Pod) }

// PodCurrent reads the pod cgroup's values and memory use.
func (t *Tree) PodCurrent(pod *corev1.Pod) (Values, error) {
	name, ok := t.PodCgroup(pod)
	if !ok {
		return Values{}, fmt.Errorf("no pod cgroups (cgroupsPerQOS is off)")
	}
	return Inspect(t.mgr, name)
}

// UpdatePod writes rc to the pod's existing cgroup (an in-place resize,
// one resource at a time).
func (t *Tree) UpdatePod(pod *corev1.Pod, rc *ResourceConfig) error {
	name, ok := t.PodCgroup(pod)
	if !ok {
		return nil
	}
	return t.mgr.Update(name, rc)
}
