package pods

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"nodeagent/internal/qos"
)

// stopOrder is the kubelet's termination ordering for a pod with
// sidecars: every container is stopped at once and runs its preStop hook
// at once, but a sidecar gets its stop signal only after every app
// container and the sidecars after it in the spec have stopped, or its
// grace period ran out.
type stopOrder struct {
	clock   clock.Clock
	mu      sync.Mutex
	stopped map[string]chan struct{} // closed once the container stopped (or was not running)
	after   map[string][]chan struct{}
}

// newStopOrder orders the pod's containers; running names those that run.
// nil for a pod without sidecars (or an orphan, whose spec is gone).
func newStopOrder(pod *corev1.Pod, running []string, clk clock.Clock) *stopOrder {
	if pod == nil || !hasSidecar(pod) {
		return nil
	}
	o := &stopOrder{clock: clk, stopped: map[string]chan struct{}{}, after: map[string][]chan struct{}{}}
	isRunning := map[string]bool{}
	for _, name := range running {
		isRunning[name] = true
	}
	channel := func(name string) chan struct{} {
		ch := make(chan struct{})
		if !isRunning[name] {
			close(ch)
		}
		o.stopped[name] = ch
		return ch
	}
	var apps []chan struct{}
	for _, c := range pod.Spec.Containers {
		apps = append(apps, channel(c.Name))
	}
	var later chan struct{} // the next sidecar in the spec
	for i := len(pod.Spec.InitContainers) - 1; i >= 0; i-- {
		c := &pod.Spec.InitContainers[i]
		ch := channel(c.Name)
		if !qos.IsSidecar(c) {
			continue
		}
		o.after[c.Name] = append(o.after[c.Name], apps...)
		if later != nil {
			o.after[c.Name] = append(o.after[c.Name], later)
		}
		later = ch
	}
	return o
}

func hasSidecar(pod *corev1.Pod) bool {
	for i := range pod.Spec.InitContainers {
		if qos.IsSidecar(&pod.Spec.InitContainers[i]) {
			return true
		}
	}
	return false
}

// waitTurn waits, at most grace, for the containers name stops after, and
// returns how long it waited. An agent stopping (ctx) ends the wait.
func (o *stopOrder) waitTurn(ctx context.Context, name string, grace time.Duration) time.Duration {
	if o == nil || grace <= 0 {
		return 0
	}
	start := o.clock.Now()
	limit := o.clock.NewTimer(grace)
	defer limit.Stop()
	for _, ch := range o.after[name] {
		select {
		case <-ch:
		case <-limit.C():
			return o.clock.Since(start)
		case <-ctx.Done():
			return o.clock.Since(start)
		}
	}
	return o.clock.Since(start)
}

// stoppedNow marks name stopped: the containers waiting on it go on.
func (o *stopOrder) stoppedNow(name string) {
	if o == nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if ch, ok := o.stopped[name]; ok {
		close(ch)
		delete(o.stopped, name)
	}
}
