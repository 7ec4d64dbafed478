package pods

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
)

// The kubelet's termination ordering: app containers go at once; a
// sidecar waits for every app container and for the sidecar after it, so
// sidecars stop in reverse order; a wait ends with the grace period.
func TestStopOrderStopsSidecarsInReverseAfterTheApps(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	pod := testPod(corev1.RestartPolicyNever, "a", "b")
	pod.Spec.InitContainers = []corev1.Container{{Name: "setup"}, {Name: "s1", RestartPolicy: &always},
		{Name: "s2", RestartPolicy: &always}, {Name: "s3", RestartPolicy: &always}}
	o := newStopOrder(pod, []string{"a", "b", "s1", "s2", "s3"}, clock.RealClock{})
	if d := o.waitTurn(context.Background(), "a", time.Minute); d > time.Second {
		t.Errorf("an app container waited %s for its turn", d)
	}
	turns := make(chan string, 3)
	for _, name := range []string{"s1", "s2", "s3"} {
		go func() {
			o.waitTurn(context.Background(), name, time.Minute)
			turns <- name
			o.stoppedNow(name)
		}()
	}
	select {
	case name := <-turns:
		t.Fatalf("%s got its turn while the app containers run", name)
	case <-time.After(50 * time.Millisecond):
	}
	o.stoppedNow("a")
	select {
	case name := <-turns:
		t.Fatalf("%s got its turn while b runs", name)
	case <-time.After(50 * time.Millisecond):
	}
	o.stoppedNow("b")
	for _, want := range []string{"s3", "s2", "s1"} {
		select {
		case name := <-turns:
			if name != want {
				t.Fatalf("%s stopped, want %s next", name, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s never got its turn", want)
		}
	}

	// A sidecar whose turn does not come is stopped when its grace ends.
	o = newStopOrder(pod, []string{"a", "s1"}, clock.RealClock{})
	if d := o.waitTurn(context.Background(), "s1", 100*time.Millisecond); d < 100*time.Millisecond || d > 5*time.Second {
		t.Errorf("waited %s with a running app container and a 100ms grace", d)
	}
	// Containers not running are not waited for.
	o = newStopOrder(pod, []string{"s1"}, clock.RealClock{})
	if d := o.waitTurn(context.Background(), "s1", time.Minute); d > time.Second {
		t.Errorf("waited %s for containers that do not run", d)
	}
	if newStopOrder(testPod(corev1.RestartPolicyNever, "a"), []string{"a"}, clock.RealClock{}) != nil {
		t.Error("an order for a pod without sidecars")
	}
	// An agent that stops does not wait out the grace period.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	o = newStopOrder(pod, []string{"a", "s1"}, clock.RealClock{})
	if d := o.waitTurn(ctx, "s1", time.Minute); d > 5*time.Second {
		t.Errorf("waited %s after the agent stopped", d)
	}
	var none *stopOrder
	if d := none.waitTurn(context.Background(), "a", time.Minute); d != 0 {
		t.Errorf("no order waited %s", d)
	}
	none.stoppedNow("a")
}
