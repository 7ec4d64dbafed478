package probes

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
)

// fakeRuns scripts probe results per kind and records each run.
type fakeRuns struct {
	mu      sync.Mutex
	results map[Kind]Result
	runs    map[Kind]int
}

func newFakeRuns() *fakeRuns {
	return &fakeRuns{results: map[Kind]Result{Liveness: Success, Readiness: Success, Startup: Success}, runs: map[Kind]int{}}
}

func (f *fakeRuns) set(k Kind, r Result) {
	f.mu.Lock()
	f.results[k] = r
	f.mu.Unlock()
}

func (f *fakeRuns) count(k Kind) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.runs[k]
}

type testBed struct {
	t       *testing.T
	clock   *clocktesting.FakeClock
	m       *Manager
	runs    *fakeRuns
	changed chan Kind
	seen    map[Kind]int
	output  string // what scripted runs say as the container

	evMu   sync.Mutex
	events []string // message|output of each event
}

func kindOf(p *corev1.Probe, c *corev1.Container) Kind {
	switch p {
	case c.LivenessProbe:
		return Liveness
	case c.StartupProbe:
		return Startup
	}
	return Readiness
}

func newBed(t *testing.T, stateDir string, start time.Time) *testBed {
	b := &testBed{t: t, clock: clocktesting.NewFakeClock(start), runs: newFakeRuns(), changed: make(chan Kind, 100), seen: map[Kind]int{}}
	b.m = NewManager(Options{Clock: b.clock, StateDir: stateDir,
		Changed: func(_ types.UID, k Kind) { b.changed <- k },
		Jitter:  func(d time.Duration) time.Duration { return d / 2 },
		Event: func(_ *corev1.Pod, _, _, _, message, output string) {
			b.evMu.Lock()
			b.events = append(b.events, message+"|"+output)
			b.evMu.Unlock()
		},
	})
	b.m.run = func(_ context.Context, p *corev1.Probe, t Target) outcome {
		k := kindOf(p, t.Container)
		b.runs.mu.Lock()
		b.runs.runs[k]++
		r := b.runs.results[k]
		b.runs.mu.Unlock()
		return outcome{result: r, message: "scripted", output: b.output}
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go b.m.Run(ctx)
	return b
}

// step advances the fake clock once the scheduler waits on it.
func (b *testBed) step(d time.Duration) {
	b.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !b.clock.HasWaiters() {
		if time.Now().After(deadline) {
			b.t.Fatal("scheduler never waited on the clock")
		}
		time.Sleep(time.Millisecond)
	}
	b.clock.Step(d)
}

// expectRun waits for the next run of kind (runs are counted, so the
// order in which concurrent runs finish does not matter).
func (b *testBed) expectRun(k Kind) {
	b.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for b.runs.count(k) <= b.seen[k] {
		if time.Now().After(deadline) {
			b.t.Fatalf("no %s probe ran", k)
		}
		time.Sleep(time.Millisecond)
	}
	b.seen[k]++
	b.settle()
}

// settle lets the result of a run be applied.
func (b *testBed) settle() {
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		b.m.mu.Lock()
		busy := false
		for _, pp := range b.m.pods {
			for _, p := range pp.probes {
				busy = busy || p.inflight
			}
		}
		b.m.mu.Unlock()
		if !busy {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// noRun checks that no run of kind happened once every goroutine of the
// test's bubble is blocked (the scheduler waits on the fake clock, which
// only the test moves): nothing more can run until it does.
func (b *testBed) noRun(k Kind) {
	b.t.Helper()
	synctest.Wait()
	b.settle()
	if n := b.runs.count(k); n > b.seen[k] {
		b.t.Fatalf("unexpected %s probe run", k)
	}
}

func TestInitialResultsAndThresholds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Unix(1000, 0)
		b := newBed(t, "", start)
		c := corev1.Container{Name: "app",
			ReadinessProbe: &corev1.Probe{PeriodSeconds: 10, TimeoutSeconds: 1, SuccessThreshold: 2, FailureThreshold: 3, ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{}}},
			LivenessProbe:  &corev1.Probe{PeriodSeconds: 10, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 3, ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{}}},
		}
		pod := testPod(c)
		b.m.AddPod(pod)
		if b.m.Ready(pod.UID, "app", "c1") {
			t.Error("readiness must start as Failure")
		}
		if !b.m.Started(pod.UID, "app", "c1") {
			t.Error("a container without a startup probe is started")
		}
		b.m.UpdatePod(pod.UID, "10.0.0.2", false, []ContainerState{{Name: "app", ID: "c1", Running: true, StartedAt: start}})
		// Readiness runs at once; liveness waits for the first tick of its
		// period, as the kubelet's ticker does.
		b.expectRun(Readiness)
		b.noRun(Liveness)
		if b.m.Ready(pod.UID, "app", "c1") {
			t.Error("ready after one success with successThreshold 2")
		}
		b.step(10 * time.Second)
		b.expectRun(Readiness)
		b.expectRun(Liveness)
		if !b.m.Ready(pod.UID, "app", "c1") {
			t.Error("not ready after two successes")
		}

		b.runs.set(Liveness, Failure)
		for i := 1; i <= 3; i++ {
			if _, _, kill := b.m.Kill(pod.UID, "app", "c1"); kill {
				t.Fatalf("kill after %d failures, want after 3", i-1)
			}
			b.step(10 * time.Second)
			b.expectRun(Liveness)
			b.expectRun(Readiness)
		}
		kind, grace, kill := b.m.Kill(pod.UID, "app", "c1")
		if !kill || kind != Liveness || grace != nil {
			t.Fatalf("Kill = %v %v %v after 3 liveness failures", kind, grace, kill)
		}
		// On hold until a new container appears: no more liveness runs.
		before := b.runs.count(Liveness)
		b.step(10 * time.Second)
		b.expectRun(Readiness)
		if n := b.runs.count(Liveness); n != before {
			t.Errorf("liveness ran %d more times while on hold", n-before)
		}
		// A new container starts over: liveness Success, readiness Failure.
		b.m.UpdatePod(pod.UID, "10.0.0.2", false, []ContainerState{{Name: "app", ID: "c2", Running: true, StartedAt: b.clock.Now()}})
		if _, _, kill := b.m.Kill(pod.UID, "app", "c2"); kill {
			t.Error("new container inherits the liveness failure")
		}
		if b.m.Ready(pod.UID, "app", "c2") {
			t.Error("new container inherits readiness")
		}
	})
}

func testPod(c corev1.Container) *corev1.Pod {
	grace := int64(30)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "pod-1"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{c}, TerminationGracePeriodSeconds: &grace},
	}
}

func TestInitialDelayAndStartupGating(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Unix(1000, 0)
		b := newBed(t, "", start)
		c := corev1.Container{Name: "app",
			StartupProbe:  &corev1.Probe{PeriodSeconds: 5, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 3, InitialDelaySeconds: 20, ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{}}},
			LivenessProbe: &corev1.Probe{PeriodSeconds: 5, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 1, ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{}}},
		}
		pod := testPod(c)
		b.m.AddPod(pod)
		b.runs.set(Startup, Failure)
		b.runs.set(Liveness, Failure)
		b.m.UpdatePod(pod.UID, "10.0.0.2", false, []ContainerState{{Name: "app", ID: "c1", Running: true, StartedAt: start}})
		b.step(19 * time.Second)
		b.noRun(Startup)
		b.noRun(Liveness)
		if b.m.Started(pod.UID, "app", "c1") {
			t.Error("started before the startup probe succeeded")
		}
		b.step(time.Second) // the initial delay is over
		b.expectRun(Startup)
		b.noRun(Liveness) // gated by startup
		b.runs.set(Startup, Success)
		b.step(5 * time.Second)
		b.expectRun(Startup)
		if !b.m.Started(pod.UID, "app", "c1") {
			t.Fatal("not started after the startup probe succeeded")
		}
		// Liveness runs right away once started, and fails (threshold 1).
		b.expectRun(Liveness)
		if kind, _, kill := b.m.Kill(pod.UID, "app", "c1"); !kill || kind != Liveness {
			t.Errorf("Kill = %v %v", kind, kill)
		}
		startups := b.runs.count(Startup)
		b.step(5 * time.Second)
		b.settle()
		if n := b.runs.count(Startup); n != startups {
			t.Error("the startup probe ran again after it succeeded")
		}
	})
}

func TestStartupFailureKillsWithProbeGrace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Unix(1000, 0)
		b := newBed(t, "", start)
		grace := int64(5)
		c := corev1.Container{Name: "app",
			StartupProbe: &corev1.Probe{PeriodSeconds: 1, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 2, TerminationGracePeriodSeconds: &grace, ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{}}},
		}
		pod := testPod(c)
		b.m.AddPod(pod)
		b.runs.set(Startup, Failure)
		b.m.UpdatePod(pod.UID, "10.0.0.2", false, []ContainerState{{Name: "app", ID: "c1", Running: true, StartedAt: start}})
		b.noRun(Startup)
		b.step(time.Second)
		b.expectRun(Startup)
		b.step(time.Second)
		b.expectRun(Startup)
		kind, g, kill := b.m.Kill(pod.UID, "app", "c1")
		if !kill || kind != Startup || g == nil || *g != 5 {
			t.Errorf("Kill = %v %v %v, want Startup with the probe's grace 5", kind, g, kill)
		}
		if got := <-b.changed; got != Startup {
			t.Errorf("changed %v", got)
		}
	})
}

func TestTerminatingPodKeepsOnlyReadiness(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Unix(1000, 0)
		b := newBed(t, "", start)
		c := corev1.Container{Name: "app",
			ReadinessProbe: &corev1.Probe{PeriodSeconds: 1, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 1, ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{}}},
			LivenessProbe:  &corev1.Probe{PeriodSeconds: 1, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 1, ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{}}},
		}
		pod := testPod(c)
		b.m.AddPod(pod)
		b.runs.set(Liveness, Failure)
		b.runs.set(Readiness, Failure)
		b.m.UpdatePod(pod.UID, "10.0.0.2", true, []ContainerState{{Name: "app", ID: "c1", Running: true, StartedAt: start}})
		for i := 0; i < 3; i++ {
			b.expectRun(Readiness)
			b.step(time.Second)
		}
		if n := b.runs.count(Liveness); n != 0 {
			t.Errorf("liveness ran %d times on a terminating pod", n)
		}
		if _, _, kill := b.m.Kill(pod.UID, "app", "c1"); kill {
			t.Error("a terminating pod's container is killed by a probe")
		}
	})
}

func TestReadinessSurvivesAgentRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		start := time.Unix(1000, 0)
		c := corev1.Container{Name: "app",
			ReadinessProbe: &corev1.Probe{PeriodSeconds: 10, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 3, ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{}}},
		}
		pod := testPod(c)
		first := newBed(t, dir, start)
		first.m.AddPod(pod)
		first.m.UpdatePod(pod.UID, "10.0.0.2", false, []ContainerState{{Name: "app", ID: "c1", Running: true, StartedAt: start}})
		first.expectRun(Readiness)
		if !first.m.Ready(pod.UID, "app", "c1") {
			t.Fatal("not ready after a success")
		}
		first.m.RemovePod(pod.UID, false) // the agent stops

		restarted := time.Unix(2000, 0)
		second := newBed(t, dir, restarted)
		second.m.AddPod(pod)
		if !second.m.Ready(pod.UID, "app", "c1") {
			t.Error("a restarted agent flips a ready container to not ready")
		}
		if second.m.Ready(pod.UID, "app", "other") {
			t.Error("an unknown container is ready")
		}
		second.m.UpdatePod(pod.UID, "10.0.0.2", false, []ContainerState{{Name: "app", ID: "c1", Running: true, StartedAt: start}})
		// Jittered: half a period (the test's jitter) after the restart.
		second.step(4 * time.Second)
		second.noRun(Readiness)
		second.runs.set(Readiness, Failure)
		second.step(time.Second)
		second.expectRun(Readiness)
		if !second.m.Ready(pod.UID, "app", "c1") {
			t.Error("one failure below the threshold made it unready")
		}
		second.m.RemovePod(pod.UID, true)
		third := newBed(t, dir, restarted)
		third.m.AddPod(pod)
		if third.m.Ready(pod.UID, "app", "c1") {
			t.Error("saved results outlived the pod")
		}
	})
}

func TestSlowProbeCountsMissedPeriods(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Unix(1000, 0)
		b := newBed(t, "", start)
		release := make(chan struct{})
		started := make(chan struct{}, 10)
		b.m.run = func(ctx context.Context, p *corev1.Probe, _ Target) outcome {
			started <- struct{}{}
			<-release
			return outcome{result: Success}
		}
		c := corev1.Container{Name: "app", ReadinessProbe: &corev1.Probe{PeriodSeconds: 1, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 3, ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{}}}}
		pod := testPod(c)
		b.m.AddPod(pod)
		b.m.UpdatePod(pod.UID, "10.0.0.2", false, []ContainerState{{Name: "app", ID: "c1", Running: true, StartedAt: start}})
		<-started
		b.step(time.Second)
		b.step(time.Second)
		b.step(time.Millisecond)
		if got := b.m.Metrics.Missed(Readiness); got != 2 {
			t.Errorf("missed periods = %d, want 2", got)
		}
		close(release)
	})
}

// A torn state file (empty after a power loss, or cut short) is not
// reported at every start: it is dropped, and the pod starts from the
// initial results, its next save written durably in its place.
func TestTornProbeStateIsRepaired(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		start := time.Unix(1000, 0)
		c := corev1.Container{Name: "app",
			ReadinessProbe: &corev1.Probe{PeriodSeconds: 10, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 3, ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{}}},
		}
		pod := testPod(c)
		file := filepath.Join(dir, string(pod.UID)+".json")
		os.WriteFile(file, []byte(`{"c1": {"rea`), 0o600)
		b := newBed(t, dir, start)
		b.m.AddPod(pod)
		if b.m.Ready(pod.UID, "app", "c1") {
			t.Error("ready from a torn file")
		}
		if _, err := os.Stat(file); !os.IsNotExist(err) {
			t.Errorf("the torn file is still there: %v", err)
		}
		b.m.UpdatePod(pod.UID, "10.0.0.2", false, []ContainerState{{Name: "app", ID: "c1", Running: true, StartedAt: start}})
		b.expectRun(Readiness)
		got, err := os.ReadFile(file)
		if err != nil || !strings.Contains(string(got), `"c1"`) {
			t.Errorf("the next save: %q %v", got, err)
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 1 {
			t.Errorf("left behind: %v", entries)
		}
	})
}

// /metrics/probes carries the kubelet's per-container labels, and a pod's
// series go with it.
func TestPerContainerMetricsFollowThePod(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Unix(1000, 0)
		b := newBed(t, "", start)
		c := corev1.Container{Name: "app", ReadinessProbe: &corev1.Probe{PeriodSeconds: 1, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 3, ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{}}}}
		pod := testPod(c)
		b.m.AddPod(pod)
		b.m.UpdatePod(pod.UID, "10.0.0.2", false, []ContainerState{{Name: "app", ID: "c1", Running: true, StartedAt: start}})
		b.expectRun(Readiness)
		reg := prometheus.NewRegistry()
		reg.MustRegister(b.m.Metrics.PerContainer())
		total := func() (float64, map[string]string) {
			families, err := reg.Gather()
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range families {
				if f.GetName() == "prober_probe_total" && len(f.Metric) > 0 {
					labels := map[string]string{}
					for _, l := range f.Metric[0].Label {
						labels[l.GetName()] = l.GetValue()
					}
					return f.Metric[0].GetCounter().GetValue(), labels
				}
			}
			return 0, nil
		}
		n, labels := total()
		want := map[string]string{"probe_type": "Readiness", "result": "successful", "container": "app", "pod": pod.Name, "namespace": pod.Namespace, "pod_uid": string(pod.UID)}
		if n != 1 || !maps.Equal(labels, want) {
			t.Errorf("prober_probe_total = %v %v, want 1 %v", n, labels, want)
		}
		b.m.RemovePod(pod.UID, true)
		if n, labels := total(); labels != nil {
			t.Errorf("the removed pod's series remain: %v %v", n, labels)
		}
	})
}

// A probe's output is the container's: the report the read-only API shows
// says (redacted) in its place; the event gets it apart from the agent's
// words, for the API server's copy alone.
func TestProbeOutputStaysOutOfReports(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBed(t, "", time.Unix(1000, 0))
		b.output = "password=s3cret"
		b.runs.set(Readiness, Failure)
		c := corev1.Container{Name: "app", ReadinessProbe: &corev1.Probe{PeriodSeconds: 10, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 3,
			ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"cat"}}}}}
		pod := testPod(c)
		b.m.AddPod(pod)
		b.m.UpdatePod(pod.UID, "10.0.0.2", false, []ContainerState{{Name: "app", ID: "c1", Running: true, StartedAt: time.Unix(1000, 0)}})
		b.expectRun(Readiness)
		reports := b.m.Reports(pod.UID)
		if len(reports) != 1 || reports[0].Last == nil || reports[0].Last.Message != "scripted(redacted)" {
			t.Fatalf("reports %+v, want the last run's message with the output redacted", reports)
		}
		b.evMu.Lock()
		defer b.evMu.Unlock()
		if len(b.events) != 1 || b.events[0] != "Readiness probe failed: scripted|password=s3cret" {
			t.Errorf("events %q, want the message and the output apart", b.events)
		}
	})
}
