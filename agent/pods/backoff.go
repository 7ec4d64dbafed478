package pods

import (
	"strings"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// Kubelet back-off constants.
const (
	initialBackOff   = 10 * time.Second
	maxBackOff       = 300 * time.Second
	backOffResetTime = 10 * time.Minute // a container that ran this long starts over
)

// backOff is the kubelet's per-key restart back-off: the first restart is
// immediate, then 10 s doubling to 300 s; an entry expires when the
// container ran for more than 10 minutes before its last exit.
type backOff struct {
	clock        clock.PassiveClock
	initial, max time.Duration
	mu           sync.Mutex
	entries      map[string]*backOffEntry
}

type backOffEntry struct {
	delay      time.Duration
	lastUpdate time.Time // when the last restart was allowed
}

// newBackOff returns the kubelet's back-off; a max below 10 s (the
// kubelet's crashLoopBackOff.maxContainerRestartPeriod) caps the first
// delay too. max <= 0 means 300 s.
func newBackOff(clk clock.PassiveClock, max time.Duration) *backOff {
	if max <= 0 {
		max = maxBackOff
	}
	return &backOff{clock: clk, initial: min(initialBackOff, max), max: max, entries: map[string]*backOffEntry{}}
}

// expired: the container ran longer than the reset time since its restart.
func (b *backOff) expired(e *backOffEntry, exitedAt time.Time) bool {
	return exitedAt.Sub(e.lastUpdate) > backOffResetTime
}

// InBackOff reports whether a container that exited at exitedAt must still
// wait, and until when.
func (b *backOff) InBackOff(key string, exitedAt time.Time) (bool, time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.entries[key]
	if !ok || b.expired(e, exitedAt) {
		return false, time.Time{}
	}
	until := exitedAt.Add(e.delay)
	return b.clock.Now().Before(until), until
}

// Next records a restart and grows the delay for the one after.
func (b *backOff) Next(key string, exitedAt time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.entries[key]
	if !ok || b.expired(e, exitedAt) {
		e = &backOffEntry{delay: b.initial}
		b.entries[key] = e
	} else {
		e.delay = min(e.delay*2, b.max)
	}
	e.lastUpdate = b.clock.Now()
}

// Delay is the current delay for key (0 without an entry).
func (b *backOff) Delay(key string) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	if e, ok := b.entries[key]; ok {
		return e.delay
	}
	return 0
}

// Forget drops every entry of a pod (keys start with "<uid>/"): a pod
// that is gone leaves nothing behind.
func (b *backOff) Forget(uid string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for key := range b.entries {
		if strings.HasPrefix(key, uid+"/") {
			delete(b.entries, key)
		}
	}
}

// Len is the number of entries.
func (b *backOff) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.entries)
}
