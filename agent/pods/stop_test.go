package pods

import (
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"nodeagent/cri/critest"
)

// A hard memory victim's processes die through its cgroup only after its
// eviction is recorded, so its worker restarts nothing that dies; a stop
// without an eviction, or without the agent's cgroup kill, kills nothing
// at once.
func TestStopPodKillsNowOnlyAnEvictionRecordedFirst(t *testing.T) {
	rt := critest.New()
	m, _ := newTestManager(t, rt, nil)
	pod := testPod(corev1.RestartPolicyAlways, "a")
	var killed []bool // whether the worker knew of the eviction at each kill
	m.mu.Lock()
	w := newWorker(m, pod.UID, pod)
	m.workers[pod.UID] = w // not run: the test reads what it was told
	m.mu.Unlock()

	if _, err := m.StopPod(pod.UID, StopOptions{Grace: ptr.To[int64](0), Failure: &Failure{Reason: "Evicted", Message: "memory"}, KillNow: true}); err != nil {
		t.Fatal(err)
	}
	if len(killed) != 0 {
		t.Fatal("killed without a cgroup kill configured")
	}
	m.killPod = func(p *corev1.Pod) (int, error) {
		killed = append(killed, w.evicting())
		return 3, errors.New("one cgroup gone")
	}
	s, err := m.StopPod(pod.UID, StopOptions{Grace: ptr.To[int64](0), Failure: &Failure{Reason: "Evicted", Message: "memory"}, KillNow: true})
	if err != nil || !s.Killed || s.Sigkilled != 3 || s.KillErr == nil {
		t.Errorf("stopped %+v (%v), want killed, 3 processes, the kill's error", s, err)
	}
	if len(killed) != 1 || !killed[0] {
		t.Errorf("kills %v, want one, after the eviction was recorded", killed)
	}
	if s, _ := m.StopPod(pod.UID, StopOptions{KillNow: true, Why: "removed"}); s.Killed || len(killed) != 1 {
		t.Errorf("a stop that is no eviction killed at once: %+v", s)
	}
	if !w.isTerminating() {
		t.Error("the last stop did not terminate the worker")
	}
	if _, err := m.StopPod("nobody", StopOptions{}); !errors.Is(err, ErrPodNotFound) {
		t.Errorf("stop of an unknown pod: %v", err)
	}
}
