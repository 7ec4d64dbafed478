package pods

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"nodeagent/agent/pleg"
	"nodeagent/agent/source"
	"nodeagent/agent/status"
	"nodeagent/cgroups"
)

// fakeRuntime runs everything instantly and records stop/remove calls.
type fakeRuntime struct {
	mu       sync.Mutex
	n        int
	stopped  []string
	sandbox  map[string]*runtimeapi.PodSandboxStatus
	attempts []uint32 // of every RunPodSandbox
	failRuns int      // RunPodSandbox calls to fail
}

func (f *fakeRuntime) next(prefix string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	return fmt.Sprintf("%s%d", prefix, f.n)
}
func (f *fakeRuntime) RunPodSandbox(_ context.Context, cfg *runtimeapi.PodSandboxConfig, _ string) (string, error) {
	f.mu.Lock()
	f.attempts = append(f.attempts, cfg.Metadata.Attempt)
	if f.failRuns > 0 {
		f.failRuns--
		f.mu.Unlock()
		return "", fmt.Errorf("failed to setup network for sandbox")
	}
	f.mu.Unlock()
	id := f.next("sb")
	f.mu.Lock()
	f.sandbox[id] = &runtimeapi.PodSandboxStatus{Id: id, Metadata: cfg.Metadata, State: runtimeapi.PodSandboxState_SANDBOX_READY,
		CreatedAt: 1, Network: &runtimeapi.PodSandboxNetworkStatus{Ip: "10.88.0.2"}, Labels: cfg.Labels}
	f.mu.Unlock()
	return id, nil
}
func (f *fakeRuntime) record(op string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stopped = append(f.stopped, op)
	return nil
}
func (f *fakeRuntime) StopPodSandbox(context.Context, string) error {
	return f.record("StopPodSandbox")
}
func (f *fakeRuntime) RemovePodSandbox(context.Context, string) error {
	return f.record("RemovePodSandbox")
}
func (f *fakeRuntime) PodSandboxStatus(_ context.Context, id string) (*runtimeapi.PodSandboxStatus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.sandbox[id], nil
}
func (f *fakeRuntime) CreateContainer(context.Context, string, *runtimeapi.ContainerConfig, *runtimeapi.PodSandboxConfig) (string, error) {
	return f.next("c"), nil
}
func (f *fakeRuntime) StartContainer(context.Context, string) error { return nil }
func (f *fakeRuntime) StopContainer(context.Context, string, int64) error {
	return f.record("StopContainer")
}
func (f *fakeRuntime) RemoveContainer(_ context.Context, id string) error {
	return f.record("RemoveContainer " + id)
}
func (f *fakeRuntime) PullImage(context.Context, string, *runtimeapi.PodSandboxConfig) (string, error) {
	return "sha256:x", nil
}
func (f *fakeRuntime) ImageStatus(context.Context, string) (*runtimeapi.Image, error) {
	return &runtimeapi.Image{Id: "sha256:x"}, nil
}

// emptyCache sees nothing in the runtime.
type emptyCache struct{}

func (emptyCache) Get(types.UID) *pleg.PodRuntime { return nil }
func (emptyCache) Inspect(_ context.Context, uid types.UID) (*pleg.PodRuntime, error) {
	return &pleg.PodRuntime{UID: uid}, nil
}
func (emptyCache) UIDs() []types.UID { return nil }

// nopCgroups accepts every write.
type nopCgroups struct{}

func (nopCgroups) Set(cgroups.Name, *cgroups.ResourceConfig) error    { return nil }
func (nopCgroups) Update(cgroups.Name, *cgroups.ResourceConfig) error { return nil }
func (nopCgroups) Exists(cgroups.Name) bool                           { return false }
func (nopCgroups) Pids(cgroups.Name) ([]int, error)                   { return nil, nil }
func (nopCgroups) Children(cgroups.Name) ([]string, error)            { return nil, nil }
func (nopCgroups) Remove(cgroups.Name) error                          { return nil }
func (nopCgroups) Path(n cgroups.Name) string                         { return n.Cgroupfs() }
func (nopCgroups) CgroupParent(n cgroups.Name) string                 { return n.Cgroupfs() }
func (nopCgroups) Version() int                                       { return 1 }

func TestManagerShutdownLeavesPodsAndNoGoroutines(t *testing.T) {
	defer goleak.VerifyNone(t)
	rt := &fakeRuntime{sandbox: map[string]*runtimeapi.PodSandboxStatus{}}
	store := status.NewStore()
	m := NewManager(Options{NodeName: "n", MaxPods: 10, PodLogsDir: t.TempDir(), RootDir: t.TempDir()}, Deps{
		Runtime: rt, Cache: emptyCache{}, Store: store, Clock: clock.RealClock{},
		Tree: cgroups.NewTree(nopCgroups{}, cgroups.TreeConfig{PerQOS: true}),
		Log:  slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	pod := testPod(corev1.RestartPolicyAlways, "a")
	pod.Spec.Containers[0].ImagePullPolicy = corev1.PullIfNotPresent

	ctx, cancel := context.WithCancel(context.Background())
	updates := make(chan source.Update)
	done := make(chan struct{})
	go func() { m.Run(ctx, updates); close(done) }()
	updates <- source.Update{Pods: []*corev1.Pod{pod}}

	deadline := time.Now().Add(5 * time.Second)
	for {
		rt.mu.Lock()
		created := rt.n // sandbox and container IDs handed out
		rt.mu.Unlock()
		if _, ok := store.Get(pod.UID); ok && created >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the worker never started the pod and published its status")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-done
	if len(rt.stopped) != 0 {
		t.Errorf("shutting the agent down touched the pod: %v", rt.stopped)
	}
}

func newTestManager(t *testing.T, rt *fakeRuntime, networkReady func() error) (*Manager, *status.Store) {
	store := status.NewStore()
	m := NewManager(Options{NodeName: "n", MaxPods: 10, PodLogsDir: t.TempDir(), RootDir: t.TempDir()}, Deps{
		Runtime: rt, Cache: emptyCache{}, Store: store, Clock: clock.RealClock{}, NetworkReady: networkReady,
		Tree: cgroups.NewTree(nopCgroups{}, cgroups.TreeConfig{PerQOS: true}),
		Log:  slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	return m, store
}

func TestNoSandboxUntilTheNetworkIsReady(t *testing.T) {
	rt := &fakeRuntime{sandbox: map[string]*runtimeapi.PodSandboxStatus{}}
	var mu sync.Mutex
	netErr := errors.New("NetworkReady=false reason:NetworkPluginNotReady")
	m, store := newTestManager(t, rt, func() error { mu.Lock(); defer mu.Unlock(); return netErr })
	pod := testPod(corev1.RestartPolicyAlways, "a")
	w := newWorker(m, pod.UID, pod)
	w.sync(context.Background())
	if len(rt.attempts) != 0 {
		t.Fatalf("RunPodSandbox called while the network is down")
	}
	p, _ := store.Get(pod.UID)
	if ws := p.Status.ContainerStatuses[0].State.Waiting; ws == nil || !strings.Contains(ws.Message, "network is not ready: NetworkReady=false") {
		t.Errorf("waiting %+v", p.Status.ContainerStatuses[0].State)
	}
	mu.Lock()
	netErr = nil
	mu.Unlock()
	w.sync(context.Background())
	if len(rt.attempts) != 1 {
		t.Errorf("no sandbox once the network is ready: %v", rt.attempts)
	}
}

func TestAFailedSandboxAttemptIsNeverReused(t *testing.T) {
	rt := &fakeRuntime{sandbox: map[string]*runtimeapi.PodSandboxStatus{}, failRuns: 2}
	m, _ := newTestManager(t, rt, nil)
	pod := testPod(corev1.RestartPolicyAlways, "a")
	w := newWorker(m, pod.UID, pod)
	for i := 0; i < 3; i++ {
		w.sync(context.Background())
	}
	if fmt.Sprint(rt.attempts) != "[0 1 2]" {
		t.Errorf("attempts %v: a failed attempt may still hold its name, so each retry needs the next number", rt.attempts)
	}
}

// fixedCache is a runtime as the relist last saw it.
type fixedCache map[types.UID]*pleg.PodRuntime

func (c fixedCache) Get(uid types.UID) *pleg.PodRuntime { return c[uid] }
func (c fixedCache) Inspect(_ context.Context, uid types.UID) (*pleg.PodRuntime, error) {
	return c[uid], nil
}
func (c fixedCache) UIDs() []types.UID { return slices.Collect(maps.Keys(c)) }

func TestReclaimContainersTakesOnlyFinishedPodsOldRecords(t *testing.T) {
	ctr := func(id, name string, state runtimeapi.ContainerState) *runtimeapi.ContainerStatus {
		return &runtimeapi.ContainerStatus{Id: id, Metadata: &runtimeapi.ContainerMetadata{Name: name}, State: state}
	}
	exited, running := runtimeapi.ContainerState_CONTAINER_EXITED, runtimeapi.ContainerState_CONTAINER_RUNNING
	cache := fixedCache{
		// Failed: the newest record of each container is its status.
		"done": {UID: "done", Containers: []*runtimeapi.ContainerStatus{
			ctr("done-main-2", "main", exited), ctr("done-side-1", "side", exited), ctr("done-main-1", "main", exited), ctr("done-main-0", "main", exited)}},
		// Running: its worker owns its containers, the exited one is its lastState.
		"live": {UID: "live", Containers: []*runtimeapi.ContainerStatus{
			ctr("live-main-2", "main", running), ctr("live-main-1", "main", exited), ctr("live-main-0", "main", exited)}},
		// Failed, but a container still runs (being stopped): left alone.
		"stopping": {UID: "stopping", Containers: []*runtimeapi.ContainerStatus{
			ctr("stopping-main-1", "main", running), ctr("stopping-main-0", "main", exited)}},
	}
	rt := &fakeRuntime{sandbox: map[string]*runtimeapi.PodSandboxStatus{}}
	store := status.NewStore()
	m := NewManager(Options{NodeName: "n", MaxPods: 10, PodLogsDir: t.TempDir(), RootDir: t.TempDir()}, Deps{
		Runtime: rt, Cache: cache, Store: store, Clock: clock.RealClock{},
		Tree: cgroups.NewTree(nopCgroups{}, cgroups.TreeConfig{PerQOS: true}),
		Log:  slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	for uid, phase := range map[types.UID]corev1.PodPhase{"done": corev1.PodFailed, "live": corev1.PodRunning, "stopping": corev1.PodFailed} {
		store.Set(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: uid, Name: string(uid)}, Status: corev1.PodStatus{Phase: phase}})
	}
	n, err := m.ReclaimContainers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"RemoveContainer done-main-1", "RemoveContainer done-main-0"}
	if n != 2 || !slices.Equal(rt.stopped, want) {
		t.Errorf("removed %d: %v, want %v", n, rt.stopped, want)
	}
}

// The back-off maps grew with every pod that ever crashed or failed a
// pull: a terminated pod's entries are forgotten, other pods' kept.
func TestTerminatedPodLeavesNoBackOffEntries(t *testing.T) {
	rt := &fakeRuntime{sandbox: map[string]*runtimeapi.PodSandboxStatus{}}
	m, _ := newTestManager(t, rt, nil)
	pod := testPod(corev1.RestartPolicyAlways, "a")
	now := time.Now()
	m.restarts.Next(string(pod.UID)+"/a/img", now)
	m.imagePulls.Next(string(pod.UID)+"/img", now)
	m.restarts.Next("other/a/img", now)
	m.imagePulls.Next("other/img", now)
	newWorker(m, pod.UID, pod).terminatePod(context.Background())
	if m.restarts.Len() != 1 || m.imagePulls.Len() != 1 || m.restarts.Delay("other/a/img") == 0 {
		t.Errorf("after the pod's termination: %d restart and %d pull back-off entries, want 1 each (the other pod's)", m.restarts.Len(), m.imagePulls.Len())
	}
}
