package pods

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"nodeagent/manifest"
)

// ErrNotStatic is a pod DeletePod refuses: it did not come from a manifest
// file, so removing a file cannot delete it (an API pod is deleted with
// kubectl).
var ErrNotStatic = errors.New("not a static pod")

// DeletePod removes a static pod's manifest with remove and terminates the
// pod, with grace seconds instead of its own grace period when set (0:
// SIGKILL at once), as `kubectl delete --grace-period` does. It is what
// nodectl asks for over the control socket. remove is the file source's:
// it deletes only a file of the static pod directory. Pods from the API
// server are refused with ErrNotStatic.
func (m *Manager) DeletePod(namespace, name string, grace *int64, remove func(file string) error) error {
	m.mu.Lock()
	var pod *corev1.Pod
	for _, p := range m.pods {
		if p.Namespace == namespace && p.Name == name {
			pod = p
		}
	}
	var w *worker
	if pod != nil {
		w = m.workers[pod.UID]
	}
	m.mu.Unlock()
	if pod == nil {
		return fmt.Errorf("pod %s/%s: %w", namespace, name, ErrPodNotFound)
	}
	// The API source sets config.source on every pod it hands out and
	// strips the manifest annotation: only the file source's pods pass.
	file := pod.Annotations[manifest.AnnotationManifest]
	if pod.Annotations[manifest.AnnotationConfigSource] != manifest.SourceFile || file == "" {
		return fmt.Errorf("pod %s/%s comes from the API server, not a manifest file: %w; delete it with kubectl delete", namespace, name, ErrNotStatic)
	}
	// The override first: the source sees the manifest go at once and
	// terminates the pod, with whatever grace the worker has then.
	if w != nil && grace != nil {
		w.overrideGrace(grace)
	}
	if err := remove(file); err != nil {
		if w != nil && grace != nil {
			w.overrideGrace(nil)
		}
		return fmt.Errorf("remove manifest of %s/%s: %w", namespace, name, err)
	}
	args := []any{"pod", fullName(pod), "pod_uid", pod.UID, "manifest", file}
	if grace != nil {
		args = append(args, "grace_period", *grace)
	}
	m.log.Info("pod deleted on request", args...)
	// Not desired any more, now: the worker may finish before the source
	// sees the manifest go (inotify is late or absent, as on 9p), and a pod
	// still desired then would be started again.
	m.mu.Lock()
	delete(m.pods, pod.UID)
	m.deleted[pod.UID] = true
	m.mu.Unlock()
	if w != nil {
		w.terminate(grace)
	}
	return nil
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
		if phase, ok := m.store.Phase(uid); ok && (phase == corev1.PodSucceeded || phase == corev1.PodFailed) {
			continue
		}
		out = append(out, p)
	}
	return out
}

// ReclaimContainers is the dead-container half of the reclaim that comes
// before a disk eviction: a finished pod keeps only the newest record of
// each container (its status; its lastState goes, as the kubelet removes
// terminated pods' containers), and a running pod what prune already
// leaves. It returns how many containers it removed.
func (m *Manager) ReclaimContainers(ctx context.Context) (int, error) {
	var removed int
	var errs []error
	for _, uid := range m.cache.UIDs() {
		phase, ok := m.store.Phase(uid)
		if !ok || (phase != corev1.PodSucceeded && phase != corev1.PodFailed) {
			continue // a running pod's worker owns its containers
		}
		rt := m.cache.Get(uid)
		if hasRunning(rt) {
			continue
		}
		for _, c := range deadContainers(rt, 1) {
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

// Evict ends a pod as the kubelet's eviction does: its containers stop
// with grace seconds and it stays listed as Failed, reason Evicted, with
// message and a DisruptionTarget condition, until its manifest changes.
func (m *Manager) Evict(uid types.UID, grace int64, message string) error {
	m.mu.Lock()
	w := m.workers[uid]
	m.mu.Unlock()
	if w == nil {
		return fmt.Errorf("pod %s: %w", uid, ErrPodNotFound)
	}
	w.evict(message, grace)
	return nil
}
