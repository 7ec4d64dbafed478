package pods

import (
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// A create the runtime refused waits 1 s, then 2, 4, 8 and 10 s at most
// before the next, however often the worker is woken.
func TestRefusedCreatesBackOff(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	w := &worker{m: &Manager{clock: clk}}
	if d := w.createBackOff("a"); d != 0 {
		t.Fatalf("a container never refused waits %v", d)
	}
	var delays []time.Duration
	for range 6 {
		delays = append(delays, w.createFailed("a"))
		if d := w.createBackOff("a"); d != delays[len(delays)-1] {
			t.Errorf("right after a refusal the wait is %v, want %v", d, delays[len(delays)-1])
		}
		clk.Step(delays[len(delays)-1])
		if d := w.createBackOff("a"); d != 0 {
			t.Errorf("after the delay the wait is %v", d)
		}
	}
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 10 * time.Second, 10 * time.Second}
	for i := range want {
		if delays[i] != want[i] {
			t.Errorf("delays %v, want %v", delays, want)
			break
		}
	}
	if d := w.createBackOff("b"); d != 0 {
		t.Errorf("another container waits %v", d)
	}
}
