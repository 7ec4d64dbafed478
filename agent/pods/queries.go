package pods

// What the pod manager answers the agent's other parts: lookups, kernel OOM
// kills, and the dead containers eviction reclaims.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"nodeagent/agent/pleg"
	"nodeagent/internal/qos"
)

// Named is the admitted pod namespace/name.
func (m *Manager) Named(namespace, name string) (*corev1.Pod, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, p := range m.pods {
		if p.Namespace == namespace && p.Name == name {
			return p, true
		}
	}
	return nil, false
}

// KernelOOMKill tells the pod's worker that the kernel OOM killer killed a
// process of one of its containers, and records it as an event on the pod
// (kubectl describe shows it there): what ("Killed process 12 (app)") and
// why (": the memory limit of ... was reached"). A kill in no pod of ours
// is ignored.
func (m *Manager) KernelOOMKill(uid types.UID, containerID, what, why string) {
	m.mu.Lock()
	w := m.workers[uid]
	m.mu.Unlock()
	if w != nil && containerID != "" {
		w.noteKernelOOM(containerID, what, why)
	}
}

// Pod is the admitted pod with uid, whether or not its worker has
// published a status yet.
func (m *Manager) Pod(uid types.UID) (*corev1.Pod, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p, ok := m.pods[uid]
	return p, ok
}

// Terminating reports whether a pod of that namespace and name is still
// stopping on the node.
func (m *Manager) Terminating(namespace, name string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, w := range m.workers {
		if w.pod != nil && w.pod.Namespace == namespace && w.pod.Name == name && w.isTerminating() {
			return true
		}
	}
	return false
}

// Active lists the admitted pods that still run: not terminating, not
// finished, not being evicted. It is what eviction ranks.
func (m *Manager) Active() []*corev1.Pod {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]*corev1.Pod, 0, len(m.pods))
	for uid, p := range m.pods {
		w := m.workers[uid]
		if w == nil || w.isTerminating() || w.evicting() {
			continue
		}
		if phase, ok := m.store.Phase(uid); ok && terminalPhase(phase) {
			continue
		}
		out = append(out, p)
	}
	return out
}

// Runs reports whether a container of the pod runs, as the runtime was
// last seen.
func (m *Manager) Runs(uid types.UID) bool { return hasRunning(m.cache.Get(uid)) }

// Released reports whether nothing of a stopped pod runs and its volumes
// are torn down, or the pod is gone: node shutdown waits for it between
// priority groups, as the kubelet waits for a group's unmounts (a CSI
// driver in a later group can still unmount).
func (m *Manager) Released(uid types.UID) bool {
	m.mu.Lock()
	w := m.workers[uid]
	m.mu.Unlock()
	return !m.Runs(uid) && (w == nil || w.volumesReleased.Load())
}

// leftLocked reports whether an admitted pod holds nothing any more: it
// finished, or was told to stop and nothing of it runs (the kubelet's
// inactive pods: a pod being stopped counts until it has). Admission,
// resizes and the QoS cgroups count only the others.
func (m *Manager) leftLocked(uid types.UID) bool {
	w := m.workers[uid]
	stopping := w != nil && (w.isTerminating() || w.evicting())
	phase, ok := m.store.Phase(uid)
	if !stopping && !(ok && terminalPhase(phase)) {
		return false
	}
	return !hasRunning(m.cache.Get(uid))
}

// pendingCopy is the status of an admitted pod whose start waits.
func pendingCopy(p *corev1.Pod, nodeIP string) *corev1.Pod {
	waiting := p.DeepCopy()
	waiting.Status = corev1.PodStatus{Phase: corev1.PodPending, QOSClass: qos.Class(p), HostIP: nodeIP}
	return waiting
}

// ReclaimContainers is the dead-container half of the reclaim that comes
// before a disk eviction: a finished pod's containers all go (their
// writable layers and logs with them; the pod's last status stands), as
// the kubelet's container GC with evictNonDeletedPods, and a running pod
// keeps what prune already leaves. It returns how many containers it
// removed.
func (m *Manager) ReclaimContainers(ctx context.Context) (int, error) {
	return m.removeFinishedContainers(ctx, func(*corev1.Pod) bool { return true })
}

// exitsPublished reports whether the pod's status already shows the exit of
// each container's newest record: once that record is gone, the status
// keeps what it showed.
func exitsPublished(pod *corev1.Pod, rt *pleg.PodRuntime) bool {
	shown := map[string]bool{}
	for _, list := range [][]corev1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses, pod.Status.EphemeralContainerStatuses} {
		for _, cs := range list {
			if _, id, ok := strings.Cut(cs.ContainerID, "://"); ok && cs.State.Terminated != nil {
				shown[id] = true
			}
		}
	}
	newest := map[string]bool{}
	for _, c := range rt.GetContainers() { // newest first
		name := c.GetMetadata().GetName()
		// A newest record that never ran (created, then the pod was
		// stopped) is not removed and has no exit to show.
		if !newest[name] && c.State == runtimeapi.ContainerState_CONTAINER_EXITED && !shown[c.Id] {
			return false
		}
		newest[name] = true
	}
	return true
}

// removeFinishedContainers removes every dead container of the finished
// pods that match, once none of theirs runs.
func (m *Manager) removeFinishedContainers(ctx context.Context, match func(*corev1.Pod) bool) (int, error) {
	var removed int
	var errs []error
	for _, uid := range m.cache.UIDs() {
		phase, ok := m.store.Phase(uid)
		if !ok || (phase != corev1.PodSucceeded && phase != corev1.PodFailed) {
			continue // a running pod's worker owns its containers
		}
		pod, ok := m.store.Get(uid)
		if !ok || !match(pod) {
			continue
		}
		rt := m.cache.Get(uid)
		if hasRunning(rt) || !exitsPublished(pod, rt) {
			continue
		}
		// Oldest first, as the kubelet's removeOldestN: the newest record
		// gives the status until it goes too, and a status computed
		// between removals must not read an older exit.
		dead := deadContainers(rt, 0)
		slices.Reverse(dead)
		for _, c := range dead {
			if err := m.removeContainer(ctx, c); err != nil {
				errs = append(errs, fmt.Errorf("remove dead container %s of pod %s: %w", shortID(c.Id), uid, err))
				continue
			}
			m.removeLogs(c)
			removed++
		}
	}
	return removed, errors.Join(errs...)
}
