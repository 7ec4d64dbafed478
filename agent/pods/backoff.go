package pods

import (
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/utils/clock"
)

// Kubelet back-off constants.
const (
	initialBackOff   = 10 * time.Second
	maxBackOff       = 300 * time.Second
	backOffResetTime = 10 * time.Minute // a container that ran this long starts over
)

// backOff is client-go's flowcontrol.Backoff, as the kubelet uses it for
// restarts and image pulls: the first attempt is immediate, then 10 s
// doubling to the max. Keys are "<pod uid>/...": an index of each pod's
// keys lets a pod that goes take its entries with it, and GC drops the
// rest once they expire.
type backOff struct {
	*flowcontrol.Backoff
	mu   sync.Mutex
	keys map[string]map[string]bool // pod UID → its keys
}

// newRestartBackOff is the kubelet's crash-loop back-off: an entry
// expires when the container ran for more than 10 minutes since the
// restart that set it. A max below 10 s (crashLoopBackOff.
// maxContainerRestartPeriod) caps the first delay too; max <= 0 means 300 s.
func newRestartBackOff(clk clock.Clock, max time.Duration) *backOff {
	if max <= 0 {
		max = maxBackOff
	}
	b := newBackOff(clk, min(initialBackOff, max), max)
	b.HasExpiredFunc = func(eventTime, lastUpdate time.Time, _ time.Duration) bool {
		return eventTime.Sub(lastUpdate) > backOffResetTime
	}
	return b
}

// newImagePullBackOff is the kubelet's image pull back-off, 10 s to 300 s;
// an entry expires 10 minutes (twice the max) after the last attempt.
func newImagePullBackOff(clk clock.Clock) *backOff {
	return newBackOff(clk, initialBackOff, maxBackOff)
}

func newBackOff(clk clock.Clock, initial, max time.Duration) *backOff {
	b := flowcontrol.NewBackOff(initial, max)
	b.Clock = clk // the agent's clock: tests step it
	return &backOff{Backoff: b, keys: map[string]map[string]bool{}}
}

// InBackOff reports whether a container that exited (or a pull that
// failed) at since must still wait, and until when.
func (b *backOff) InBackOff(key string, since time.Time) (bool, time.Time) {
	if !b.IsInBackOffSince(key, since) {
		return false, time.Time{}
	}
	return true, since.Add(b.Get(key))
}

// Next records an attempt and grows the delay for the one after.
func (b *backOff) Next(key string, since time.Time) {
	b.Backoff.Next(key, since)
	uid, _, _ := strings.Cut(key, "/")
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.keys[uid] == nil {
		b.keys[uid] = map[string]bool{}
	}
	b.keys[uid][key] = true
}

// Delay is the current delay for key (0 without an entry).
func (b *backOff) Delay(key string) time.Duration { return b.Get(key) }

// Forget drops every entry of a pod.
func (b *backOff) Forget(uid string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for key := range b.keys[uid] {
		b.DeleteEntry(key)
	}
	delete(b.keys, uid)
}

// GC drops the entries that expired (a restarted container that kept
// running, a changed image's old key), and their index.
func (b *backOff) GC() {
	b.Backoff.GC()
	b.mu.Lock()
	defer b.mu.Unlock()
	for uid, keys := range b.keys {
		for key := range keys {
			if b.Get(key) == 0 {
				delete(keys, key)
			}
		}
		if len(keys) == 0 {
			delete(b.keys, uid)
		}
	}
}

// Len is the number of entries.
func (b *backOff) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, keys := range b.keys {
		for key := range keys {
			if b.Get(key) > 0 {
				n++
			}
		}
	}
	return n
}
