package pods

import (
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"nodeagent/agent/pleg"
	"nodeagent/cri"
)

// removedRetention is how long a removed pod's restart counts are kept.
// The kubelet leaves a removed pod's dead containers to its garbage
// collector, which runs every minute; a static pod whose manifest comes
// back (same content, same UID) before then counts on from them. The agent
// removes the containers at once, so it keeps their counts instead.
const removedRetention = time.Minute

// removedPod is what is left of a removed pod's containers.
type removedPod struct {
	at       time.Time
	restarts map[string]int32 // by container name: the newest one's count
}

// rememberRestarts keeps the restart counts of a pod's containers that are
// about to be removed.
func (m *Manager) rememberRestarts(uid types.UID, rt *pleg.PodRuntime) {
	counts := map[string]int32{}
	for _, c := range rt.GetContainers() {
		n, err := strconv.Atoi(c.GetAnnotations()[cri.AnnotationRestartCount])
		name := c.GetMetadata().GetName()
		if err != nil || name == "" {
			continue
		}
		if old, ok := counts[name]; !ok || int32(n) > old {
			counts[name] = int32(n)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.clock.Now()
	m.pruneRemovedLocked(now)
	if len(counts) > 0 {
		m.removed[uid] = removedPod{at: now, restarts: counts}
	}
}

// removedRestartCount is the restart count of a removed pod's container
// with that name, if the pod was removed within removedRetention.
func (m *Manager) removedRestartCount(uid types.UID, name string) (int32, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pruneRemovedLocked(m.clock.Now())
	n, ok := m.removed[uid].restarts[name]
	return n, ok
}

func (m *Manager) pruneRemovedLocked(now time.Time) {
	for uid, r := range m.removed {
		if now.Sub(r.at) > removedRetention {
			delete(m.removed, uid)
		}
	}
}
