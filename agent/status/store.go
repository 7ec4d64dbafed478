// Package status is the single source of every pod's corev1.PodStatus: pod
// workers and admission write it, the local API and nodectl read it. The
// Store keeps its lock inside and hands out deep copies; it never calls out
// while holding the lock.
package status

import (
	"sort"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"

	"nodeagent/internal/notify"
)

// Store holds the latest pod objects (spec and status) by UID.
type Store struct {
	mu          sync.RWMutex
	pods        map[types.UID]*corev1.Pod
	subscribers []*notify.Set[types.UID]
}

// Subscribe returns a queue that receives the UID of every pod whose
// status changes or that is deleted from now on: what a status syncer
// (the API server's pods/status) reads the store by. Adding never blocks
// the store's writers.
func (s *Store) Subscribe() *notify.Set[types.UID] {
	set := notify.NewSet[types.UID]()
	s.mu.Lock()
	s.subscribers = append(s.subscribers, set)
	s.mu.Unlock()
	return set
}

// tell queues uid for the subscribers, outside the store's lock.
func tell(subscribers []*notify.Set[types.UID], uid types.UID) {
	for _, set := range subscribers {
		set.Add(uid)
	}
}

// NewStore returns an empty store.
func NewStore() *Store { return &Store{pods: map[types.UID]*corev1.Pod{}} }

// Set stores a copy of pod. It reports whether the status changed.
func (s *Store) Set(pod *corev1.Pod) bool {
	cp := pod.DeepCopy()
	s.mu.Lock()
	old, ok := s.pods[pod.UID]
	s.pods[pod.UID] = cp
	changed := !ok || !equality.Semantic.DeepEqual(old.Status, cp.Status)
	subscribers := s.subscribers
	s.mu.Unlock()
	if changed {
		tell(subscribers, pod.UID)
	}
	return changed
}

// Update changes a stored pod in place under the store's lock; a pod not
// stored (deleted meanwhile) stays absent.
func (s *Store) Update(uid types.UID, change func(*corev1.Pod)) {
	s.mu.Lock()
	p, ok := s.pods[uid]
	subscribers := s.subscribers
	changed := false
	switch {
	case ok && len(subscribers) > 0:
		// Only a subscriber needs to know whether the status changed.
		before := p.Status.DeepCopy()
		change(p)
		changed = !equality.Semantic.DeepEqual(*before, p.Status)
	case ok:
		change(p)
	}
	s.mu.Unlock()
	if changed {
		tell(subscribers, uid)
	}
}

// Phase returns a stored pod's phase without copying it.
func (s *Store) Phase(uid types.UID) (corev1.PodPhase, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	p, ok := s.pods[uid]
	if !ok {
		return "", false
	}
	return p.Status.Phase, true
}

// Get returns a copy of the pod.
func (s *Store) Get(uid types.UID) (*corev1.Pod, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	p, ok := s.pods[uid]
	if !ok {
		return nil, false
	}
	return p.DeepCopy(), true
}

// Named returns a copy of the pod with that namespace and name; of two
// (a pod replaced under the same name, the old one still stopping), the
// newer.
func (s *Store) Named(namespace, name string) (*corev1.Pod, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var found *corev1.Pod
	for _, p := range s.pods {
		if p.Namespace == namespace && p.Name == name && (found == nil || found.CreationTimestamp.Before(&p.CreationTimestamp)) {
			found = p
		}
	}
	if found == nil {
		return nil, false
	}
	return found.DeepCopy(), true
}

// Delete forgets a pod.
func (s *Store) Delete(uid types.UID) {
	s.mu.Lock()
	_, ok := s.pods[uid]
	delete(s.pods, uid)
	subscribers := s.subscribers
	s.mu.Unlock()
	if ok {
		tell(subscribers, uid)
	}
}

// List returns copies of all pods sorted by namespace and name.
func (s *Store) List() []corev1.Pod {
	s.mu.RLock()
	out := make([]corev1.Pod, 0, len(s.pods))
	for _, p := range s.pods {
		out = append(out, *p.DeepCopy())
	}
	s.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].Namespace != out[j].Namespace {
			return out[i].Namespace < out[j].Namespace
		}
		return out[i].Name < out[j].Name
	})
	return out
}
