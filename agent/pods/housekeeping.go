package pods

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// collectOrphans terminates pods the runtime holds (with this node's label)
// that no source wants, e.g. after their manifest was removed while the
// agent was down. It waits for the sources' first update.
func (m *Manager) collectOrphans() {
	uids := m.cache.UIDs()
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.synced {
		return
	}
	for _, uid := range uids {
		if _, wanted := m.pods[uid]; wanted || m.workers[uid] != nil {
			continue
		}
		m.stopLocked(uid, nil, StopOptions{Why: "found in the runtime; no source wants it"})
	}
}

// housekeep is the manager's periodic cleanup: orphans, their
// directories, and forgotten back-off and pull records.
func (m *Manager) housekeep() {
	m.mu.Lock()
	m.expirePreemptionWaitsLocked()
	m.mu.Unlock()
	m.collectOrphans()
	m.removeOrphanedPodDirs()
	m.restarts.GC()
	m.imagePulls.GC()
}

// containerGCPeriod is the kubelet's ContainerGCPeriod.
const containerGCPeriod = time.Minute

// collectEvictedContainers removes every dead container of the evicted
// pods in the background, pressure or not: the kubelet's container GC
// removes them all (ShouldPodContentBeRemoved), where a pod that merely
// finished keeps its last records for `kubectl logs`.
func (m *Manager) collectEvictedContainers() {
	m.mu.Lock()
	synced, ctx := m.synced, m.ctx
	m.mu.Unlock()
	if !synced || ctx == nil || ctx.Err() != nil || !m.collectingEvicted.CompareAndSwap(false, true) {
		return
	}
	m.wg.Go(func() {
		defer m.collectingEvicted.Store(false)
		n, err := m.removeFinishedContainers(ctx, func(p *corev1.Pod) bool {
			// Preempted pods too: the kubelet kills both as evictions.
			return p.Status.Phase == corev1.PodFailed && (p.Status.Reason == evictedReason || p.Status.Reason == preemptReason)
		})
		if n > 0 || err != nil {
			m.log.Info("removed the dead containers of evicted pods", "containers", n, "err", err)
		}
	})
}

// Reconcile rewrites the whole cgroup tree for the admitted pods and
// removes pod cgroups that belong to no pod.
func (m *Manager) Reconcile() {
	m.mu.Lock()
	active := m.admittedLocked()
	busy, resizing := map[types.UID]bool{}, map[types.UID]bool{}
	for uid, w := range m.workers {
		busy[uid] = true
		resizing[uid] = w.resizing()
	}
	synced := m.synced
	m.mu.Unlock()
	if err := m.tree.SyncExcept(active, func(uid types.UID) bool { return resizing[uid] }); err != nil {
		m.log.Warn("reconcile cgroup tree", "err", err)
	}
	if !synced {
		return
	}
	found, err := m.tree.PodCgroups()
	if err != nil {
		m.log.Warn("list pod cgroups", "err", err)
		return
	}
	wanted := map[types.UID]bool{}
	for _, p := range active {
		wanted[p.UID] = true
	}
	for uid, name := range found {
		if wanted[uid] || busy[uid] || m.cache.Get(uid) != nil {
			continue
		}
		if err := m.tree.RemovePod(name); err != nil {
			m.log.Warn("remove orphaned pod cgroup", "cgroup", name.Cgroupfs(), "err", err)
		} else {
			m.log.Info("removed orphaned pod cgroup", "cgroup", name.Cgroupfs())
		}
	}
}
