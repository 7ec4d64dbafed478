package residency

import (
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// Releaser calls release once work has been quiet for a while: once after
// start-up and once after each burst (pods starting or stopping), so the
// pages a burst touched go while the steady loops keep theirs.
type Releaser struct {
	clock   clock.PassiveClock
	quiet   time.Duration
	release func() error

	mu      sync.Mutex
	last    time.Time // the latest work
	pending bool      // work since the last release
}

// NewReleaser counts start-up as work done now.
func NewReleaser(clk clock.PassiveClock, quiet time.Duration, release func() error) *Releaser {
	return &Releaser{clock: clk, quiet: quiet, release: release, last: clk.Now(), pending: true}
}

// Busy records work done now.
func (r *Releaser) Busy() {
	r.mu.Lock()
	r.last, r.pending = r.clock.Now(), true
	r.mu.Unlock()
}

// Step releases when there was work since the last release and none for
// quiet; it reports whether it did.
func (r *Releaser) Step() (bool, error) {
	r.mu.Lock()
	due := r.pending && r.clock.Since(r.last) >= r.quiet
	if due {
		r.pending = false
	}
	r.mu.Unlock()
	if !due {
		return false, nil
	}
	return true, r.release()
}
