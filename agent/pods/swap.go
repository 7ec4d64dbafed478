package pods

import (
	corev1 "k8s.io/api/core/v1"
)

// swapResizeInfeasibleLocked refuses, as the kubelet 1.37 does, a memory
// request change of a container that may swap (LimitedSwap) before or
// after the resize, unless its resizePolicy restarts it for memory.
func (m *Manager) swapResizeInfeasibleLocked(p *corev1.Pod) string {
	have, ok := m.allocated.Get(p.UID)
	allocated := m.pods[p.UID]
	if !ok || allocated == nil {
		return ""
	}
	for _, cs := range [][]corev1.Container{p.Spec.Containers, p.Spec.InitContainers} {
		for i := range cs {
			c := &cs[i]
			was, ok := have.Containers[c.Name]
			if !ok || c.Resources.Requests.Memory().Equal(*was.Requests.Memory()) || restartsForMemory(c) {
				continue
			}
			before := c.DeepCopy()
			before.Resources = was
			_, swapsNow := m.opts.Swap.ContainerSwap(p, c, m.opts.MemoryCapacity)
			_, swapped := m.opts.Swap.ContainerSwap(allocated, before, m.opts.MemoryCapacity)
			if swapsNow || swapped {
				return "In-place resize of containers with swap is not supported."
			}
		}
	}
	return ""
}

func restartsForMemory(c *corev1.Container) bool {
	for _, rp := range c.ResizePolicy {
		if rp.ResourceName == corev1.ResourceMemory {
			return rp.RestartPolicy == corev1.RestartContainer
		}
	}
	return false
}
