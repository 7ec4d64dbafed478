// Package notify is a coalescing queue between a producer that must never
// block (a relist, a probe worker, a kernel notification) and a loop that
// selects on it.
package notify

import "sync"

// Set holds the keys added since the consumer last took them. Add never
// blocks and never drops: a key added twice before Take is taken once.
type Set[K comparable] struct {
	ready chan struct{}

	mu      sync.Mutex
	pending map[K]struct{}
	order   []K
}

// NewSet returns an empty set.
func NewSet[K comparable]() *Set[K] {
	return &Set[K]{ready: make(chan struct{}, 1), pending: map[K]struct{}{}}
}

// Add queues k and wakes the consumer.
func (s *Set[K]) Add(k K) {
	s.mu.Lock()
	if _, ok := s.pending[k]; !ok {
		s.pending[k] = struct{}{}
		s.order = append(s.order, k)
	}
	s.mu.Unlock()
	select {
	case s.ready <- struct{}{}:
	default:
	}
}

// Ready is readable when keys may be waiting.
func (s *Set[K]) Ready() <-chan struct{} { return s.ready }

// Take returns the waiting keys in the order they were first added and
// empties the set.
func (s *Set[K]) Take() []K {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.order
	s.pending, s.order = map[K]struct{}{}, nil
	return out
}
