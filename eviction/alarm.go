package eviction

import (
	"sync"
	"time"
)

// What woke the agent, as traces name it.
const (
	WokenByMemcgThreshold = "memcg threshold"
	WokenByMemcgOOM       = "memcg OOM"
	WokenByTripwire       = "memory.high tripwire"
	WokenByPSI            = "PSI trigger"
	WokenByKernelOOM      = "kernel OOM kill"
)

// Alarm is how kernel notifications wake the eviction manager. It exists
// before both: the notifiers ring it, the manager waits on it, and a ring
// before the manager runs is kept for its first round.
type Alarm struct {
	kick chan struct{}

	mu    sync.Mutex
	first wakeup // the first notification since the manager last looked
}

// wakeup is a kernel notification: when it fired and which source.
type wakeup struct {
	at time.Time
	by string
}

// NewAlarm returns a silent alarm.
func NewAlarm() *Alarm { return &Alarm{kick: make(chan struct{}, 1)} }

// Ring records a notification from one of the WokenBy sources that fired
// at at (the next decision's trace names it) and wakes the manager.
func (a *Alarm) Ring(at time.Time, by string) {
	a.mu.Lock()
	if a.first.at.IsZero() {
		a.first = wakeup{at: at, by: by}
	}
	a.mu.Unlock()
	select {
	case a.kick <- struct{}{}:
	default:
	}
}

// take returns the notification a reading made at reading reflects: one
// that came in before it, even if the poll had already woken the manager.
// A later one is kept for the next round.
func (a *Alarm) take(reading time.Time) wakeup {
	a.mu.Lock()
	defer a.mu.Unlock()
	w := a.first
	if w.at.After(reading) {
		return wakeup{}
	}
	a.first = wakeup{}
	return w
}
