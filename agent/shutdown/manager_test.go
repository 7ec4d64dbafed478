package shutdown

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"math"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// fakeLogind is logind on a bus the test drives.
type fakeLogind struct {
	mu              sync.Mutex
	delay           time.Duration
	raised          time.Duration
	locks, released int
	inhibitErr      error
	events          chan bool
	closed          bool
}

func (f *fakeLogind) InhibitDelayMax() (time.Duration, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.delay, nil
}

func (f *fakeLogind) RaiseInhibitDelay(d time.Duration) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.raised, f.delay = d, d
	return nil
}

func (f *fakeLogind) Inhibit() (func() error, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.inhibitErr != nil {
		return nil, f.inhibitErr
	}
	f.locks++
	once := sync.Once{}
	return func() error {
		once.Do(func() { f.mu.Lock(); f.released++; f.mu.Unlock() })
		return nil
	}, nil
}

func (f *fakeLogind) PrepareForShutdown(context.Context) (<-chan bool, error) { return f.events, nil }
func (f *fakeLogind) Close() error                                            { f.closed = true; return nil }

func (f *fakeLogind) held() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.locks - f.released
}

// fakePods stops pods at once, or never for those named in stuck.
type fakePods struct {
	mu      sync.Mutex
	pods    []*corev1.Pod
	stopped []string
	grace   map[string]time.Duration
	stuck   map[string]bool
}

func (f *fakePods) Active() []*corev1.Pod {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*corev1.Pod
	for _, p := range f.pods {
		if _, gone := f.grace[p.Name]; !gone {
			out = append(out, p)
		}
	}
	return out
}

func (f *fakePods) Shutdown(ctx context.Context, p *corev1.Pod, grace time.Duration) {
	f.mu.Lock()
	f.stopped = append(f.stopped, p.Name)
	f.grace[p.Name] = grace
	stuck := f.stuck[p.Name]
	f.mu.Unlock()
	if stuck {
		<-ctx.Done()
	}
}

func (f *fakePods) order() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return strings.Join(f.stopped, " ")
}

func pod(name string, priority int32, tgps int64) *corev1.Pod {
	p := &corev1.Pod{}
	p.Name, p.UID = name, types.UID(name)
	p.Spec.Priority = &priority
	if tgps >= 0 {
		p.Spec.TerminationGracePeriodSeconds = ptr.To(tgps)
	}
	return p
}

func eventually(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if ok() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

// shutdownGracePeriod and shutdownGracePeriodCriticalPods become two
// groups, as the kubelet's migrateConfig; the priority list is sorted.
func TestGroups(t *testing.T) {
	g := Groups(nil, 20*time.Second, 10*time.Second)
	if len(g) != 2 || g[0] != (Group{0, 10 * time.Second}) || g[1] != (Group{2000000000, 10 * time.Second}) {
		t.Errorf("migrated groups %v", g)
	}
	if g := Groups(nil, 0, 0); g != nil {
		t.Errorf("no grace period: %v", g)
	}
	g = Groups([]Group{{100000, time.Second}, {0, 2 * time.Second}, {1000, 3 * time.Second}}, 0, 0)
	if g[0].Priority != 0 || g[1].Priority != 1000 || g[2].Priority != 100000 {
		t.Errorf("by priority: %v", g)
	}
	groups := Groups([]Group{{0, time.Second}, {1000, time.Second}, {2000000000, time.Second}}, 0, 0)
	by := groupByPriority(groups, []*corev1.Pod{pod("neg", -5, -1), pod("zero", 0, -1), pod("mid", 1500, -1), pod("crit", 2000001000, -1)})
	if len(by[0]) != 2 || by[1][0].Name != "mid" || by[2][0].Name != "crit" {
		t.Errorf("grouped %v", by)
	}
}

func newTest(t *testing.T, groups []Group, pods *fakePods) (*Manager, *fakeLogind, *[]bool, func()) {
	t.Helper()
	lg := &fakeLogind{delay: 5 * time.Second, events: make(chan bool)}
	var changes []bool
	var mu sync.Mutex
	m := NewManager(Options{Groups: groups, Connect: func() (Logind, error) { return lg, nil }, Pods: pods,
		StatePath: filepath.Join(t.TempDir(), StateFile),
		Changed:   func(s bool) { mu.Lock(); changes = append(changes, s); mu.Unlock() },
		Log:       slog.New(slog.NewTextHandler(io.Discard, nil))})
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan error, 1)
	done := make(chan struct{})
	go func() { m.Run(ctx, func(err error) { started <- err }); close(done) }()
	if err := <-started; err != nil {
		t.Fatal(err)
	}
	return m, lg, &changes, func() { cancel(); <-done }
}

// On PrepareForShutdown the pods stop lowest priority first, each within
// min(its group's share, its own grace period); the node is shutting down
// and the lock goes once they are done; a cancel takes it again.
func TestShutdownStopsPodsByPriorityThenCancel(t *testing.T) {
	pods := &fakePods{grace: map[string]time.Duration{}, pods: []*corev1.Pod{
		pod("critical", 2000001000, -1), pod("normal-long", 0, 120), pod("normal-short", 0, 5), pod("critical-short", 2000001000, 5),
		pod("normal-forever", 0, math.MaxInt64)}}
	m, lg, changes, stop := newTest(t, Groups(nil, 20*time.Second, 10*time.Second), pods)
	defer stop()
	if lg.raised != 20*time.Second || lg.held() != 1 {
		t.Fatalf("at start: raised the delay to %v, %d locks held; want 20s and 1", lg.raised, lg.held())
	}
	lg.events <- true
	eventually(t, "the lock released", func() bool { return lg.held() == 0 })
	order := strings.Fields(pods.order())
	if len(order) != 5 || !strings.HasPrefix(order[0], "normal") || !strings.HasPrefix(order[2], "normal") || !strings.HasPrefix(order[3], "critical") {
		t.Errorf("stopped in the order %v, want the normal pods first", order)
	}
	for name, want := range map[string]time.Duration{"normal-long": 10 * time.Second, "normal-short": 5 * time.Second, "critical": 10 * time.Second, "critical-short": 5 * time.Second, "normal-forever": 10 * time.Second} {
		if got := pods.grace[name]; got != want {
			t.Errorf("%s stopped with %v, want %v", name, got, want)
		}
	}
	if !m.ShuttingDown() {
		t.Error("not shutting down")
	}
	if start, end := m.Times(); start.IsZero() || end.Before(start) {
		t.Errorf("state times %v %v", start, end)
	}
	st, err := loadState(m.opts.StatePath)
	if err != nil || st.EndTime.IsZero() {
		t.Errorf("state file: %+v %v", st, err)
	}
	lg.events <- false
	eventually(t, "the lock taken again", func() bool { return lg.held() == 1 })
	if m.ShuttingDown() || len(*changes) != 2 || (*changes)[0] != true || (*changes)[1] != false {
		t.Errorf("after the cancel: shutting down %v, changes %v", m.ShuttingDown(), *changes)
	}
}

// A group whose pods do not stop within its grace period is left behind:
// the next group goes on.
func TestShutdownGroupTimesOut(t *testing.T) {
	pods := &fakePods{grace: map[string]time.Duration{}, stuck: map[string]bool{"hung": true},
		pods: []*corev1.Pod{pod("hung", 0, -1), pod("critical", 2000001000, -1)}}
	_, lg, _, stop := newTest(t, []Group{{0, 200 * time.Millisecond}, {2000000000, time.Second}}, pods)
	defer stop()
	lg.events <- true
	eventually(t, "the critical group stopped", func() bool { return strings.Contains(pods.order(), "critical") })
	eventually(t, "the lock released", func() bool { return lg.held() == 0 })
}

// A lock that cannot be taken fails the start, as the kubelet's.
func TestStartFailsWithoutTheLock(t *testing.T) {
	lg := &fakeLogind{delay: time.Minute, inhibitErr: errors.New("access denied"), events: make(chan bool)}
	m := NewManager(Options{Groups: Groups(nil, 10*time.Second, 0), Connect: func() (Logind, error) { return lg, nil },
		Pods: &fakePods{}, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	var got error
	m.Run(context.Background(), func(err error) { got = err })
	if got == nil || !strings.Contains(got.Error(), "failed creating systemd inhibitor: access denied") || !lg.closed {
		t.Errorf("start: %v (bus closed %v)", got, lg.closed)
	}
	if NewManager(Options{}) != nil || (*Manager)(nil).ShuttingDown() {
		t.Error("no groups: a manager")
	}
}
