package pods

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"regexp"
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
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"nodeagent/agent/events"
	"nodeagent/agent/pleg"
	"nodeagent/agent/source"
	"nodeagent/agent/status"
	"nodeagent/cgroups"
	"nodeagent/cri"
	"nodeagent/cri/critest"
	"nodeagent/internal/layout"
	"nodeagent/manifest"
)

// attempts are the attempt numbers of every RunPodSandbox call.
func attempts(rt *critest.Runtime) []uint32 {
	var out []uint32
	for _, c := range rt.Calls("RunPodSandbox") {
		out = append(out, c.Sandbox.GetMetadata().GetAttempt())
	}
	return out
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
	rt := critest.New()
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
		created := len(rt.Calls("RunPodSandbox", "CreateContainer"))
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
	if stops := rt.Ops("StopPodSandbox", "RemovePodSandbox", "StopContainer", "RemoveContainer"); len(stops) != 0 {
		t.Errorf("shutting the agent down touched the pod: %v", stops)
	}
}

func newTestManager(t *testing.T, rt *critest.Runtime, networkReady func() error) (*Manager, *status.Store) {
	store := status.NewStore()
	m := NewManager(Options{NodeName: "n", MaxPods: 10, PodLogsDir: t.TempDir(), RootDir: t.TempDir()}, Deps{
		Runtime: rt, Cache: emptyCache{}, Store: store, Clock: clock.RealClock{}, NetworkReady: networkReady,
		Tree: cgroups.NewTree(nopCgroups{}, cgroups.TreeConfig{PerQOS: true}),
		Log:  slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	return m, store
}

// newRelistingManager is a manager over rt whose cache relists it (the
// pods' containers are seen to start and stop), with its root at root.
func newRelistingManager(t *testing.T, rt *critest.Runtime, root string) *Manager {
	discard := slog.New(slog.NewTextHandler(io.Discard, nil))
	return NewManager(Options{NodeName: "n", MaxPods: 10, PodLogsDir: t.TempDir(), RootDir: root}, Deps{
		Runtime: rt, Cache: pleg.New(rt, pleg.Options{Node: "n", Clock: clock.RealClock{}, Log: discard}), Store: status.NewStore(), Clock: clock.RealClock{},
		Tree: cgroups.NewTree(nopCgroups{}, cgroups.TreeConfig{PerQOS: true}), Log: discard,
	})
}

// waitUntil polls cond for up to 10 s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func TestNoSandboxUntilTheNetworkIsReady(t *testing.T) {
	rt := critest.New()
	var mu sync.Mutex
	netErr := errors.New("NetworkReady=false reason:NetworkPluginNotReady")
	m, store := newTestManager(t, rt, func() error { mu.Lock(); defer mu.Unlock(); return netErr })
	pod := testPod(corev1.RestartPolicyAlways, "a")
	w := newWorker(m, pod.UID, pod)
	w.sync(context.Background())
	if len(attempts(rt)) != 0 {
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
	if len(attempts(rt)) != 1 {
		t.Errorf("no sandbox once the network is ready: %v", attempts(rt))
	}
}

func TestAFailedSandboxAttemptIsNeverReused(t *testing.T) {
	rt := critest.New()
	rt.Fail("RunPodSandbox", errors.New("failed to setup network for sandbox"), errors.New("failed to setup network for sandbox"))
	m, _ := newTestManager(t, rt, nil)
	pod := testPod(corev1.RestartPolicyAlways, "a")
	w := newWorker(m, pod.UID, pod)
	for i := 0; i < 3; i++ {
		w.sync(context.Background())
	}
	if fmt.Sprint(attempts(rt)) != "[0 1 2]" {
		t.Errorf("attempts %v: a failed attempt may still hold its name, so each retry needs the next number", attempts(rt))
	}
}

// fixedCache is a runtime as the relist last saw it.
type fixedCache map[types.UID]*pleg.PodRuntime

func (c fixedCache) Get(uid types.UID) *pleg.PodRuntime { return c[uid] }
func (c fixedCache) Inspect(_ context.Context, uid types.UID) (*pleg.PodRuntime, error) {
	return c[uid], nil
}
func (c fixedCache) UIDs() []types.UID { return slices.Collect(maps.Keys(c)) }

// cachedManager is a manager over a runtime the relist saw as cache.
func cachedManager(t *testing.T, rt *critest.Runtime, cache fixedCache, store *status.Store) *Manager {
	return NewManager(Options{NodeName: "n", MaxPods: 10, PodLogsDir: t.TempDir(), RootDir: t.TempDir()}, Deps{
		Runtime: rt, Cache: cache, Store: store, Clock: clock.RealClock{},
		Tree: cgroups.NewTree(nopCgroups{}, cgroups.TreeConfig{PerQOS: true}),
		Log:  slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
}

func TestReclaimContainersTakesFinishedPodsContainersOnly(t *testing.T) {
	ctr := func(id, name string, state runtimeapi.ContainerState) *runtimeapi.ContainerStatus {
		return &runtimeapi.ContainerStatus{Id: id, Metadata: &runtimeapi.ContainerMetadata{Name: name}, State: state}
	}
	exited, running := runtimeapi.ContainerState_CONTAINER_EXITED, runtimeapi.ContainerState_CONTAINER_RUNNING
	cache := fixedCache{
		// Failed: every record goes (the pod's status stands without them).
		"done": {UID: "done", Containers: []*runtimeapi.ContainerStatus{
			ctr("done-main-2", "main", exited), ctr("done-side-1", "side", exited), ctr("done-main-1", "main", exited), ctr("done-main-0", "main", exited)}},
		// Running: its worker owns its containers, the exited one is its lastState.
		"live": {UID: "live", Containers: []*runtimeapi.ContainerStatus{
			ctr("live-main-2", "main", running), ctr("live-main-1", "main", exited), ctr("live-main-0", "main", exited)}},
		// Failed, but a container still runs (being stopped): left alone.
		"stopping": {UID: "stopping", Containers: []*runtimeapi.ContainerStatus{
			ctr("stopping-main-1", "main", running), ctr("stopping-main-0", "main", exited)}},
	}
	rt, store := critest.New(), status.NewStore()
	m := cachedManager(t, rt, cache, store)
	for uid, phase := range map[types.UID]corev1.PodPhase{"done": corev1.PodFailed, "live": corev1.PodRunning, "stopping": corev1.PodFailed} {
		store.Set(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: uid, Name: string(uid)},
			Status: corev1.PodStatus{Phase: phase, ContainerStatuses: exitsOf(cache[uid])}})
	}
	n, err := m.ReclaimContainers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"RemoveContainer done-main-0", "RemoveContainer done-main-1", "RemoveContainer done-side-1", "RemoveContainer done-main-2"}
	if got := rt.Ops("RemoveContainer", "StopContainer", "StopPodSandbox", "RemovePodSandbox"); n != 4 || !slices.Equal(got, want) {
		t.Errorf("removed %d: %v, want %v", n, got, want)
	}
}

// exitsOf is a status showing the exit of each container's newest record.
func exitsOf(rt *pleg.PodRuntime) []corev1.ContainerStatus {
	var out []corev1.ContainerStatus
	seen := map[string]bool{}
	for _, c := range rt.Containers {
		if name := c.GetMetadata().GetName(); !seen[name] {
			seen[name] = true
			out = append(out, corev1.ContainerStatus{Name: name, ContainerID: "containerd://" + c.Id,
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137}}})
		}
	}
	return out
}

// The container GC removes an evicted pod's containers at once, as the
// kubelet's (ShouldPodContentBeRemoved); a pod that only failed keeps its
// last records for logs, a running pod its worker's.
func TestEvictedPodsContainersAreCollected(t *testing.T) {
	ctr := func(id string, state runtimeapi.ContainerState) *runtimeapi.ContainerStatus {
		return &runtimeapi.ContainerStatus{Id: id, Metadata: &runtimeapi.ContainerMetadata{Name: "main"}, State: state}
	}
	exited, running := runtimeapi.ContainerState_CONTAINER_EXITED, runtimeapi.ContainerState_CONTAINER_RUNNING
	cache := fixedCache{
		"evicted": {UID: "evicted", Containers: []*runtimeapi.ContainerStatus{ctr("evicted-1", exited), ctr("evicted-0", exited)}},
		"failed":  {UID: "failed", Containers: []*runtimeapi.ContainerStatus{ctr("failed-1", exited), ctr("failed-0", exited)}},
		// Evicted, its exit not yet in its status: kept until it is.
		"unpublished": {UID: "unpublished", Containers: []*runtimeapi.ContainerStatus{ctr("unpublished-0", exited)}},
		// Preempted, with a debug container, and a newest record that never
		// ran (the pod stopped between create and start): the exited ones go.
		"preempted": {UID: "preempted", Containers: []*runtimeapi.ContainerStatus{
			ctr("preempted-2", runtimeapi.ContainerState_CONTAINER_CREATED),
			{Id: "preempted-debug", Metadata: &runtimeapi.ContainerMetadata{Name: "debug"}, State: exited}, ctr("preempted-1", exited)}},
		"live": {UID: "live", Containers: []*runtimeapi.ContainerStatus{ctr("live-1", running), ctr("live-0", exited)}},
	}
	rt, store := critest.New(), status.NewStore()
	m := cachedManager(t, rt, cache, store)
	set := func(uid types.UID, phase corev1.PodPhase, reason string) {
		store.Set(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: uid, Name: string(uid)},
			Status: corev1.PodStatus{Phase: phase, Reason: reason, ContainerStatuses: exitsOf(cache[uid])}})
	}
	set("evicted", corev1.PodFailed, "Evicted")
	store.Set(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "preempted", Name: "preempted"}, Status: corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Preempting",
		ContainerStatuses:          []corev1.ContainerStatus{{Name: "main", ContainerID: "containerd://preempted-2", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{}}}},
		EphemeralContainerStatuses: []corev1.ContainerStatus{{Name: "debug", ContainerID: "containerd://preempted-debug", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{}}}}}})
	store.Set(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "unpublished", Name: "unpublished"}, Status: corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted",
		ContainerStatuses: []corev1.ContainerStatus{{Name: "main", ContainerID: "containerd://unpublished-0", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}}})
	set("failed", corev1.PodFailed, "")
	set("live", corev1.PodRunning, "")
	m.ctx = context.Background()
	m.collectEvictedContainers()
	m.wg.Wait()
	if got := rt.Ops("RemoveContainer"); len(got) != 0 {
		t.Errorf("removed %v before the sources synced, want nothing", got)
	}
	m.synced = true
	m.collectEvictedContainers()
	m.wg.Wait()
	want := []string{"RemoveContainer evicted-0", "RemoveContainer evicted-1", "RemoveContainer preempted-1", "RemoveContainer preempted-debug"}
	got := rt.Ops("RemoveContainer", "StopContainer", "RemovePodSandbox")
	slices.Sort(got) // pods in map order
	if !slices.Equal(got, want) {
		t.Errorf("removed %v, want %v", got, want)
	}
}

// The back-off maps grew with every pod that ever crashed or failed a
// pull: a terminated pod's entries are forgotten, other pods' kept.
func TestTerminatedPodLeavesNoBackOffEntries(t *testing.T) {
	rt := critest.New()
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

func TestSourcesAreMergedAndTheSyncWaitsForEach(t *testing.T) {
	m, _ := newTestManager(t, critest.New(), nil)
	m.opts.Sources = []string{"api", "file"}
	a, b := testPod(corev1.RestartPolicyAlways, "a"), testPod(corev1.RestartPolicyAlways, "b")
	a.UID, b.UID = "uid-a", "uid-b"
	all, complete := m.merge(source.Update{Source: "file", Pods: []*corev1.Pod{a}})
	if len(all.Pods) != 1 || complete {
		t.Fatalf("after file alone: %d pods, complete %v; want 1, not complete (api has not spoken)", len(all.Pods), complete)
	}
	all, complete = m.merge(source.Update{Source: "api", Pods: []*corev1.Pod{b}})
	if len(all.Pods) != 2 || all.Pods[0].UID != "uid-b" || !complete {
		t.Fatalf("after both: %v, complete %v; want api's then file's pods, complete", all.Pods, complete)
	}
	all, _ = m.merge(source.Update{Source: "file"})
	if len(all.Pods) != 1 || all.Pods[0].UID != "uid-b" {
		t.Errorf("file emptied: %v; api's pod must stay", all.Pods)
	}
}

func TestManagerDeletedAndFinishedAPIPods(t *testing.T) {
	rt := critest.New()
	store := status.NewStore()
	gone := make(chan *corev1.Pod, 4)
	m := NewManager(Options{NodeName: "n", MaxPods: 10, PodLogsDir: t.TempDir(), RootDir: t.TempDir()}, Deps{
		Runtime: rt, Cache: emptyCache{}, Store: store, Clock: clock.RealClock{},
		Tree: cgroups.NewTree(nopCgroups{}, cgroups.TreeConfig{PerQOS: true}),
		Log:  slog.New(slog.NewTextHandler(io.Discard, nil)),
		Gone: func(p *corev1.Pod) { gone <- p },
	})
	deleted := testPod(corev1.RestartPolicyAlways, "a")
	deleted.Name, deleted.UID = "deleted", "uid-deleted"
	now := metav1.Now()
	deleted.DeletionTimestamp, deleted.DeletionGracePeriodSeconds = &now, new(int64)
	finished := testPod(corev1.RestartPolicyNever, "a")
	finished.Name, finished.UID = "finished", "uid-finished"
	finished.Status = corev1.PodStatus{Phase: corev1.PodSucceeded, Reason: "from-the-api"}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	updates := make(chan source.Update)
	done := make(chan struct{})
	go func() { m.Run(ctx, updates); close(done) }()
	defer func() { cancel(); <-done }()
	for range 2 { // the second update must not tell again
		updates <- source.Update{Source: "api", Pods: []*corev1.Pod{deleted, finished}}
	}

	select {
	case p := <-gone:
		if p.UID != deleted.UID {
			t.Errorf("Gone told of %s", p.UID)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a deleted pod with nothing on the node was not reported gone")
	}
	select {
	case p := <-gone:
		t.Errorf("Gone told twice (%s)", p.UID)
	case <-time.After(300 * time.Millisecond):
	}
	if got, ok := store.Get(finished.UID); !ok || got.Status.Phase != corev1.PodSucceeded || got.Status.Reason != "from-the-api" {
		t.Errorf("finished pod's status %+v, want the API's", got)
	}
	if _, ok := store.Get(deleted.UID); ok {
		t.Error("the deleted pod has a status")
	}
	if n := len(rt.Calls("RunPodSandbox")); n != 0 {
		t.Errorf("%d sandboxes started; neither pod may run", n)
	}
}

// The kernel's OOM record settles a 137 exit the runtime left unexplained,
// whether it is read before or after the relist shows the exit.
func TestOOMKilledFromTheKernelLog(t *testing.T) {
	pod := testPod(corev1.RestartPolicyNever, "a")
	m := NewManager(Options{NodeName: "n", MaxPods: 10, PodLogsDir: t.TempDir(), RootDir: t.TempDir()}, Deps{
		Runtime: critest.New(), Cache: emptyCache{}, Store: status.NewStore(), Clock: clocktesting.NewFakeClock(t0),
		Tree: cgroups.NewTree(nopCgroups{}, cgroups.TreeConfig{PerQOS: true}),
		Log:  slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	rec := record("a", runtimeapi.ContainerState_CONTAINER_EXITED, 137, "0", t0)
	rt := &pleg.PodRuntime{Sandboxes: []*runtimeapi.PodSandboxStatus{readySandbox()}, Containers: []*runtimeapi.ContainerStatus{rec}}

	after := newWorker(m, pod.UID, pod)
	after.readTerminationMessages(rt)
	if after.oomKilled[rec.Id] {
		t.Fatal("OOM killed without any sign of it")
	}
	after.noteKernelOOM(rec.Id, "Killed process 7 (app)", ": the node ran out of memory")
	after.readTerminationMessages(rt)
	if !after.oomKilled[rec.Id] {
		t.Error("the kernel's record read after the exit did not mark the container OOM killed")
	}

	before := newWorker(m, pod.UID, pod)
	before.noteKernelOOM(rec.Id, "", "")
	before.noteKernelOOM("another-container", "", "")
	before.readTerminationMessages(rt)
	if !before.oomKilled[rec.Id] || len(before.oomKilled) != 1 {
		t.Errorf("oomKilled = %v, want only %s", before.oomKilled, rec.Id)
	}

	clean := record("a", runtimeapi.ContainerState_CONTAINER_EXITED, 0, "0", t0)
	if clean.Id != rec.Id {
		t.Fatalf("records of the same container differ in ID: %s, %s", clean.Id, rec.Id)
	}
	zero := newWorker(m, pod.UID, pod)
	zero.noteKernelOOM(rec.Id, "", "")
	zero.readTerminationMessages(&pleg.PodRuntime{Containers: []*runtimeapi.ContainerStatus{clean}})
	if zero.oomKilled[rec.Id] {
		t.Error("a container that exited 0 was marked OOM killed")
	}
}

func TestContainerLogLinks(t *testing.T) {
	m, _ := newTestManager(t, critest.New(), nil)
	m.opts.ContainerLogLinks = filepath.Join(t.TempDir(), "containers")
	logFile := filepath.Join(t.TempDir(), "0.log")
	if err := os.WriteFile(logFile, []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	pod := testPod(corev1.RestartPolicyAlways, "app")
	m.linkLog(pod, "app", "abc123", logFile)
	link := filepath.Join(m.opts.ContainerLogLinks, "p-node_default_app-abc123.log")
	if b, err := os.ReadFile(link); err != nil || string(b) != "hello\n" {
		t.Fatalf("link %s: %q %v", link, b, err)
	}
	m.removeLogs(&runtimeapi.ContainerStatus{Id: "abc123", LogPath: logFile, Metadata: &runtimeapi.ContainerMetadata{Name: "app"},
		Labels: map[string]string{cri.LabelPodName: pod.Name, cri.LabelPodNamespace: pod.Namespace}})
	if _, err := os.Lstat(link); !os.IsNotExist(err) {
		t.Errorf("the link outlived its container: %v", err)
	}
	if _, err := os.Stat(logFile); !os.IsNotExist(err) {
		t.Errorf("the log outlived its container: %v", err)
	}
	long := m.logLink(strings.Repeat("p", 253), "ns", "c", "id")
	if len(filepath.Base(long)) != 255 || !strings.HasSuffix(long, ".log") {
		t.Errorf("a long name is cut to 255 bytes with its suffix: %d %q", len(filepath.Base(long)), filepath.Base(long))
	}
}

// A static pod whose manifest is removed and put back has the same UID:
// its containers count on from the removed ones' restarts, as under the
// kubelet, whose garbage collector leaves the dead containers a minute.
func TestRemovedPodsRestartCountsAreKeptAMinute(t *testing.T) {
	pod := testPod(corev1.RestartPolicyAlways, "a", "b")
	exited := runtimeapi.ContainerState_CONTAINER_EXITED
	cache := fixedCache{pod.UID: {UID: pod.UID, Containers: []*runtimeapi.ContainerStatus{
		record("b", exited, 1, "2", t0.Add(time.Minute)), record("a", exited, 0, "0", t0), record("b", exited, 1, "1", t0)}}}
	clk := clocktesting.NewFakeClock(t0)
	m := NewManager(Options{NodeName: "n", MaxPods: 10, PodLogsDir: t.TempDir(), RootDir: t.TempDir()}, Deps{
		Runtime: critest.New(), Cache: cache, Store: status.NewStore(), Clock: clk,
		Tree: cgroups.NewTree(nopCgroups{}, cgroups.TreeConfig{PerQOS: true}),
		Log:  slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	newWorker(m, pod.UID, pod).terminatePod(context.Background())
	for name, want := range map[string]int32{"a": 0, "b": 2} {
		if n, ok := m.removedRestartCount(pod.UID, name); !ok || n != want {
			t.Errorf("container %s: restart count %d (kept %v), want %d", name, n, ok, want)
		}
	}
	if _, ok := m.removedRestartCount("other", "a"); ok {
		t.Error("another pod's UID has restart counts")
	}
	clk.Step(removedRetention + time.Second)
	if _, ok := m.removedRestartCount(pod.UID, "a"); ok || len(m.removed) != 0 {
		t.Errorf("restart counts kept past %v: %v", removedRetention, m.removed)
	}
}

// A pod that left its source on request (nodectl delete) stops with the
// grace period the update carries, and a manifest written again is a new
// request that runs.
func TestAPodDeletedOnRequestStopsWithItsGrace(t *testing.T) {
	rt := critest.New()
	m := newRelistingManager(t, rt, t.TempDir())
	pod := testPod(corev1.RestartPolicyAlways, "a")
	pod.Annotations = map[string]string{manifest.AnnotationConfigSource: manifest.SourceFile}
	pod.Spec.Containers[0].ImagePullPolicy = corev1.PullIfNotPresent
	pod.Spec.TerminationGracePeriodSeconds = ptr.To[int64](30)
	worker := func() *worker {
		m.mu.Lock()
		defer m.mu.Unlock()
		return m.workers[pod.UID]
	}
	waitFor := func(what string, cond func() bool) { t.Helper(); waitUntil(t, what, cond) }
	ctx, cancel := context.WithCancel(context.Background())
	updates := make(chan source.Update)
	done := make(chan struct{})
	go func() { m.Run(ctx, updates); close(done) }()
	defer func() { cancel(); <-done }()
	updates <- source.Update{Source: "file", Pods: []*corev1.Pod{pod}}
	waitFor("the container started", func() bool { return len(rt.Calls("StartContainer")) > 0 })

	updates <- source.Update{Source: "file", Grace: map[types.UID]int64{pod.UID: 0}}
	waitFor("the worker to finish", func() bool { return worker() == nil })
	stops := rt.Calls("StopContainer")
	if len(stops) == 0 {
		t.Fatal("the container was not stopped")
	}
	for _, c := range stops {
		if c.Timeout != 0 {
			t.Errorf("stopped with a %d s timeout, want the update's grace 0 over the pod's 30", c.Timeout)
		}
	}
	updates <- source.Update{Source: "file", Pods: []*corev1.Pod{pod}}
	waitFor("the re-added pod's worker", func() bool { return worker() != nil })
}

// A kernel OOM kill is an event on the pod, naming the process and the
// container, where kubectl describe looks.
func TestKernelOOMKillIsAPodEvent(t *testing.T) {
	pod := testPod(corev1.RestartPolicyNever, "a")
	rec := record("a", runtimeapi.ContainerState_CONTAINER_RUNNING, 0, "0", t0)
	rt := &pleg.PodRuntime{Sandboxes: []*runtimeapi.PodSandboxStatus{readySandbox()}, Containers: []*runtimeapi.ContainerStatus{rec}}
	recorder := events.NewRecorder(clocktesting.NewFakeClock(t0), "n", 0)
	m := NewManager(Options{NodeName: "n", MaxPods: 10, PodLogsDir: t.TempDir(), RootDir: t.TempDir()}, Deps{
		Runtime: critest.New(), Cache: fixedCache{pod.UID: rt}, Store: status.NewStore(), Clock: clocktesting.NewFakeClock(t0),
		Tree: cgroups.NewTree(nopCgroups{}, cgroups.TreeConfig{PerQOS: true}), Events: recorder,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	w := newWorker(m, pod.UID, pod)
	w.noteKernelOOM(rec.Id, "Killed process 7 (memhog)", ": the memory limit of /kubepods/pod1/"+rec.Id+" was reached")
	var got []corev1.Event
	for _, e := range recorder.List() {
		if e.Reason == "OOMKilling" {
			got = append(got, e)
		}
	}
	want := "Killed process 7 (memhog) in container a: the memory limit of /kubepods/pod1/" + rec.Id + " was reached"
	if len(got) != 1 || got[0].Message != want || got[0].InvolvedObject.Kind != "Pod" || got[0].InvolvedObject.Name != pod.Name ||
		got[0].InvolvedObject.FieldPath != "spec.containers{a}" || got[0].Type != corev1.EventTypeWarning {
		t.Errorf("OOM events = %+v, want one Warning on the pod's container a: %q", got, want)
	}
	// The sandbox's pause process, and a container the relist has not
	// listed yet, are named as such, on the pod itself.
	w.noteKernelOOM("sb", "Killed process 8 (pause)", "")
	w.noteKernelOOM("0123456789abcdef", "Killed process 9 (x)", "")
	var where []string
	for _, e := range recorder.List() {
		if e.Reason == "OOMKilling" && e.InvolvedObject.FieldPath == "" {
			where = append(where, e.Message)
		}
	}
	slices.Sort(where)
	if strings.Join(where, "|") != "Killed process 8 (pause) in the pod's sandbox|Killed process 9 (x) in container 0123456789ab" {
		t.Errorf("pod-level OOM events = %q", where)
	}
}

// A pull reports its progress while it runs, and the size when done, in
// the kubelet's words.
func TestImagePullReportsProgressAndSize(t *testing.T) {
	pod := testPod(corev1.RestartPolicyNever, "a")
	clk := clocktesting.NewFakeClock(t0)
	rt := critest.New()
	rt.PulledSize = 12345
	release := make(chan struct{})
	rt.OnPull = func() { <-release }
	recorder := events.NewRecorder(clk, "n", 0)
	m := NewManager(Options{NodeName: "n", MaxPods: 10, PodLogsDir: t.TempDir(), RootDir: t.TempDir()}, Deps{
		Runtime: rt, Cache: emptyCache{}, Store: status.NewStore(), Clock: clk,
		Tree: cgroups.NewTree(nopCgroups{}, cgroups.TreeConfig{PerQOS: true}), Events: recorder,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	w := newWorker(m, pod.UID, pod)
	done := make(chan bool)
	go func() {
		_, _, ok := w.ensureImage(context.Background(), pod, &pod.Spec.Containers[0], nil)
		done <- ok
	}()
	messages := func(reason string) []string {
		var out []string
		for _, e := range recorder.List() {
			if e.Reason == reason {
				out = append(out, e.Message)
			}
		}
		return out
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(messages("Pulling")) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("no progress event; Pulling events: %q", messages("Pulling"))
		}
		if clk.HasWaiters() {
			clk.Step(pullProgressPeriod)
		}
		time.Sleep(time.Millisecond)
	}
	if got := messages("Pulling"); got[0] != `Pulling image "img"` || got[1] != `Still pulling image "img": 30s so far` {
		t.Errorf("Pulling events = %q", got)
	}
	close(release)
	if !<-done {
		t.Fatal("the pull failed")
	}
	if got := messages("Pulled"); len(got) != 1 || !regexp.MustCompile(`^Successfully pulled image "img" in \S+ \(\S+ including waiting\)\. Image size: 12345 bytes\.$`).MatchString(got[0]) {
		t.Errorf("Pulled events = %q", got)
	}
}

// A pod directory whose pod is neither desired, nor has a worker, nor is
// in the runtime is removed (a killed agent's leftover); the others stay,
// and nothing is removed before the sources' first update.
func TestOrphanedPodDirectoriesAreRemoved(t *testing.T) {
	m, _ := newTestManager(t, critest.New(), nil)
	desired := testPod(corev1.RestartPolicyAlways, "a")
	podsDir := filepath.Join(m.opts.RootDir, "pods")
	for _, uid := range []string{string(desired.UID), "gone-uid", orphanPrefix + "half-removed"} {
		if err := os.MkdirAll(filepath.Join(podsDir, uid, "volumes", "kubernetes.io~secret", "s"), 0o750); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(podsDir, uid, "volumes", "kubernetes.io~secret", "s", "token"), []byte("x"), 0o600)
	}
	m.mu.Lock()
	m.pods[desired.UID] = desired
	m.mu.Unlock()
	m.removeOrphanedPodDirs()
	m.wg.Wait()
	if _, err := os.Stat(filepath.Join(podsDir, "gone-uid")); err != nil {
		t.Fatalf("removed before the sources spoke: %v", err)
	}
	m.mu.Lock()
	m.synced = true
	m.mu.Unlock()
	m.removeOrphanedPodDirs()
	m.wg.Wait()
	entries, _ := os.ReadDir(podsDir)
	if len(entries) != 1 || entries[0].Name() != string(desired.UID) {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("pod directories left: %v, want only the desired pod's", names)
	}
}

// Pod directories are 0750 (the kubelet's), also where an older agent made
// them 0755: secret files below are no local user's.
func TestPodDirectoriesAre0750(t *testing.T) {
	root := t.TempDir()
	f := nodeFiles{root: layout.Root(root)}
	os.MkdirAll(filepath.Join(root, "pods", "old", "volumes"), 0o755)
	os.Chmod(filepath.Join(root, "pods"), 0o755)
	for _, uid := range []types.UID{"new", "old"} {
		if err := f.makePodDirs(uid); err != nil {
			t.Fatal(err)
		}
		for _, dir := range []string{filepath.Join(root, "pods"), f.podDir(uid), filepath.Join(f.podDir(uid), "volumes")} {
			if st, err := os.Stat(dir); err != nil {
				t.Error(err)
			} else if st.Mode().Perm() != 0o750 {
				t.Errorf("%s: %v, want 0750", dir, st.Mode())
			}
		}
	}
}

// taskRuntime is a containerd-like runtime: it can delete a task the CRI
// cannot remove.
type taskRuntime struct {
	*critest.Runtime
	deleted []string
}

func (r *taskRuntime) DeleteTask(_ context.Context, id string) error {
	r.deleted = append(r.deleted, id)
	return nil
}

// A container whose start was cut off (EXITED, never started) may hold a
// task the runtime will not let go: its removal fails until that task is
// deleted through the runtime's own API. A container that ran is never
// treated so.
func TestRemovingACutOffContainerDeletesItsTask(t *testing.T) {
	stale := errors.New("RemoveContainer: cannot delete running task: failed precondition")
	for _, c := range []struct {
		name      string
		startedAt int64
		deleter   bool
		wantTask  bool
		wantError bool
	}{
		{"never started", 0, true, true, false},
		{"ran", t0.UnixNano(), true, false, true},
		{"another runtime", 0, false, false, true},
	} {
		base := critest.New()
		rt := &taskRuntime{Runtime: base}
		var r Runtime = base
		if c.deleter {
			r = rt
		}
		m, _ := newTestManager(t, base, nil)
		m.rt = r
		rec := record("a", runtimeapi.ContainerState_CONTAINER_EXITED, 128, "0", t0)
		rec.StartedAt = c.startedAt
		base.PutContainer(rec)
		base.Fail("RemoveContainer", stale)
		err := m.removeContainer(context.Background(), rec)
		if (len(rt.deleted) > 0) != c.wantTask || (err != nil) != c.wantError {
			t.Errorf("%s: tasks deleted %v, err %v", c.name, rt.deleted, err)
		}
	}
}
