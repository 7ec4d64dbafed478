package pleg

import (
	"context"
	"io"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"nodeagent/cri"
	"nodeagent/cri/critest"
)

func labels(uid, node string) map[string]string {
	return map[string]string{cri.LabelPodUID: uid, cri.LabelManagedBy: node}
}

// putContainer stores a container of pod uid on node "n".
func putContainer(rt *critest.Runtime, id, uid string, state runtimeapi.ContainerState) {
	rt.PutContainer(&runtimeapi.ContainerStatus{Id: id, State: state, Labels: labels(uid, "n"), Metadata: &runtimeapi.ContainerMetadata{Name: id}})
}

// statusCalls counts the status calls a relist made.
func statusCalls(rt *critest.Runtime) int {
	return len(rt.Calls("PodSandboxStatus", "ContainerStatus"))
}

type recorder struct {
	mu   sync.Mutex
	uids []string
}

func (r *recorder) notify(uid types.UID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.uids = append(r.uids, string(uid))
}

func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.uids
	r.uids = nil
	sort.Strings(out)
	return out
}

func TestRelistFetchesOnlyChangesAndNotifies(t *testing.T) {
	rt := critest.New()
	rt.PutSandbox(&runtimeapi.PodSandboxStatus{Id: "sb1", State: runtimeapi.PodSandboxState_SANDBOX_READY, Labels: labels("u1", "n")})
	putContainer(rt, "c1", "u1", runtimeapi.ContainerState_CONTAINER_RUNNING)
	putContainer(rt, "c2", "u2", runtimeapi.ContainerState_CONTAINER_RUNNING)
	rt.PutContainer(&runtimeapi.ContainerStatus{Id: "other", Labels: labels("u3", "another-node")})
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	rec := &recorder{}
	c := New(rt, Options{Node: "n", Clock: clk, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Notify: rec.notify})
	ctx := context.Background()

	if err := c.Relist(ctx); err != nil {
		t.Fatal(err)
	}
	if got := rec.take(); len(got) != 2 || got[0] != "u1" || got[1] != "u2" {
		t.Errorf("first relist notified %v, want u1 u2 (never another node's pods)", got)
	}
	if n := statusCalls(rt); n != 3 {
		t.Errorf("first relist made %d status calls, want 3", n)
	}
	if p := c.Get("u1"); p == nil || len(p.Sandboxes) != 1 || len(p.Containers) != 1 {
		t.Errorf("u1 = %+v", p)
	}

	rt.ResetCalls()
	clk.Step(time.Second)
	c.Relist(ctx)
	if got := rec.take(); len(got) != 0 || statusCalls(rt) != 0 {
		t.Errorf("unchanged relist: notified %v, %d status calls", got, statusCalls(rt))
	}

	putContainer(rt, "c2", "u2", runtimeapi.ContainerState_CONTAINER_EXITED)
	rt.ResetCalls()
	clk.Step(time.Second)
	c.Relist(ctx)
	if got := rec.take(); len(got) != 1 || got[0] != "u2" || statusCalls(rt) != 1 {
		t.Errorf("one change: notified %v, %d status calls", got, statusCalls(rt))
	}
	if c.Get("u2").Containers[0].State != runtimeapi.ContainerState_CONTAINER_EXITED {
		t.Error("cache did not take the new state")
	}

	rt.DeleteContainer("c2")
	clk.Step(time.Second)
	c.Relist(ctx)
	if got := rec.take(); len(got) != 1 || got[0] != "u2" {
		t.Errorf("removal notified %v", got)
	}
	if c.Get("u2") != nil {
		t.Error("a pod with nothing left in the runtime must vanish from the cache")
	}
	if !c.LastRelist().Equal(clk.Now()) {
		t.Errorf("LastRelist = %v, want %v", c.LastRelist(), clk.Now())
	}
}

func TestInspectIsNotOverwrittenByAnOlderRelist(t *testing.T) {
	rt := critest.New()
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	c := New(rt, Options{Node: "n", Clock: clk, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	ctx := context.Background()
	// While a relist is between its lists, a worker starts a container and
	// inspects its pod: the relist's older view must not win.
	rt.OnNextList(func() {
		clk.Step(time.Second)
		putContainer(rt, "new", "u1", runtimeapi.ContainerState_CONTAINER_RUNNING)
		if _, err := c.Inspect(ctx, "u1"); err != nil {
			t.Error(err)
		}
		saved := rt.Container("new") // hide it from the rest of the relist's listing
		rt.DeleteContainer("new")
		t.Cleanup(func() { rt.PutContainer(saved) })
	})
	if err := c.Relist(ctx); err != nil {
		t.Fatal(err)
	}
	if p := c.Get("u1"); p == nil || len(p.Containers) != 1 {
		t.Fatalf("the fresher Inspect was overwritten: %+v", p)
	}
}

func TestInspectOfAnEmptyPodForgetsIt(t *testing.T) {
	rt := critest.New()
	putContainer(rt, "c1", "u1", runtimeapi.ContainerState_CONTAINER_EXITED)
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	c := New(rt, Options{Node: "n", Clock: clk, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	ctx := context.Background()
	c.Relist(ctx)
	if len(c.UIDs()) != 1 {
		t.Fatalf("UIDs = %v", c.UIDs())
	}
	rt.DeleteContainer("c1")
	clk.Step(time.Second)
	p, err := c.Inspect(ctx, "u1")
	if err != nil || p == nil || len(p.Containers) != 0 {
		t.Fatalf("Inspect = %+v, %v", p, err)
	}
	if len(c.UIDs()) != 0 || c.Get("u1") != nil {
		t.Errorf("a pod with nothing in the runtime still counts as present: %v", c.UIDs())
	}
}

// A worker's Inspect must not swallow the change for the relist: the pod
// is still announced, so its worker wakes for the next step.
func TestInspectDoesNotSuppressRelistEvents(t *testing.T) {
	rt := critest.New()
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	rec := &recorder{}
	c := New(rt, Options{Node: "n", Clock: clk, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Notify: rec.notify})
	ctx := context.Background()
	c.Relist(ctx)
	putContainer(rt, "c1", "u1", runtimeapi.ContainerState_CONTAINER_RUNNING)
	if _, err := c.Inspect(ctx, "u1"); err != nil {
		t.Fatal(err)
	}
	clk.Step(time.Second)
	c.Relist(ctx)
	if got := rec.take(); len(got) != 1 || got[0] != "u1" {
		t.Errorf("relist after an Inspect notified %v, want u1", got)
	}
}

type stream struct {
	ctx    context.Context
	events int
}

func (s *stream) Recv() (*runtimeapi.ContainerEventResponse, error) {
	if s.events > 0 {
		s.events--
		return &runtimeapi.ContainerEventResponse{ContainerId: "c1"}, nil
	}
	<-s.ctx.Done()
	return nil, s.ctx.Err()
}

func TestWatchEventsKicksARelist(t *testing.T) {
	c := New(critest.New(), Options{Node: "n", Clock: clocktesting.NewFakeClock(time.Unix(0, 0)), Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		c.WatchEvents(ctx, func(ctx context.Context) (EventStream, error) { return &stream{ctx: ctx, events: 3}, nil }, cri.IsUnimplemented)
		close(done)
	}()
	select {
	case <-c.kick:
	case <-time.After(5 * time.Second):
		t.Fatal("an event did not ask for a relist")
	}
	cancel()
	<-done
}

func TestWatchEventsGivesUpOnUnimplemented(t *testing.T) {
	c := New(critest.New(), Options{Node: "n", Clock: clocktesting.NewFakeClock(time.Unix(0, 0)), Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	opened := 0
	c.WatchEvents(context.Background(), func(context.Context) (EventStream, error) {
		opened++
		return nil, &cri.Error{Op: "GetContainerEvents", Code: codes.Unimplemented}
	}, cri.IsUnimplemented)
	if opened != 1 {
		t.Errorf("opened %d times: an unimplemented stream must not be retried", opened)
	}
}

func TestHealthFollowsRelist(t *testing.T) {
	rt := critest.New()
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	c := New(rt, Options{Node: "n", Clock: clk, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err := c.Healthy(); err == nil {
		t.Error("healthy before any relist")
	}
	c.Relist(context.Background())
	clk.Step(RelistThreshold)
	if err := c.Healthy(); err != nil {
		t.Errorf("at the threshold: %v", err)
	}
	clk.Step(time.Second)
	if err := c.Healthy(); err == nil || !strings.Contains(err.Error(), "relist was last seen active 3m1s ago; threshold is 3m0s") {
		t.Errorf("past the threshold: %v", err)
	}
}

// A container's resources change without a state change (an in-place
// resize): what an Inspect read is not undone by the relists after it,
// which carry statuses over while the state stays, nor by one running
// across it.
func TestResizedResourcesSurviveLaterRelists(t *testing.T) {
	rt := critest.New()
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	c := New(rt, Options{Node: "n", Clock: clk, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	ctx := context.Background()
	putContainer(rt, "c1", "u1", runtimeapi.ContainerState_CONTAINER_RUNNING)
	if err := c.Relist(ctx); err != nil {
		t.Fatal(err)
	}
	quota := func() int64 {
		p := c.Get("u1")
		if p == nil || len(p.Containers) != 1 {
			t.Fatalf("pod %+v", p)
		}
		return p.Containers[0].GetResources().GetLinux().GetCpuQuota()
	}
	resize := func(q int64) {
		if err := rt.UpdateContainerResources(ctx, "c1", &runtimeapi.LinuxContainerResources{CpuQuota: q, CpuPeriod: 100000}); err != nil {
			t.Fatal(err)
		}
		clk.Step(time.Second)
		if _, err := c.Inspect(ctx, "u1"); err != nil {
			t.Fatal(err)
		}
	}
	resize(20000)
	for i := 0; i < 2; i++ {
		clk.Step(time.Second)
		if err := c.Relist(ctx); err != nil {
			t.Fatal(err)
		}
		if q := quota(); q != 20000 {
			t.Fatalf("relist %d after the resize: quota %d, want 20000", i+1, q)
		}
	}
	// A resize read while a relist is between its lists.
	rt.OnNextList(func() { resize(30000) })
	if err := c.Relist(ctx); err != nil {
		t.Fatal(err)
	}
	clk.Step(time.Second)
	if err := c.Relist(ctx); err != nil {
		t.Fatal(err)
	}
	if q := quota(); q != 30000 {
		t.Fatalf("after a relist across the resize: quota %d, want 30000", q)
	}
}
