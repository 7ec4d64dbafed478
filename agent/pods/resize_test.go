package pods

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"nodeagent/agent/pods/allocation"
	"nodeagent/agent/pods/criconfig"
	"nodeagent/cgroups"
	"nodeagent/cri"
	"nodeagent/cri/critest"
	"nodeagent/internal/layout"
)

func withResources(p *corev1.Pod, cpuReq, cpuLim string) *corev1.Pod {
	p = p.DeepCopy()
	c := &p.Spec.Containers[0]
	c.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpuReq)}
	c.Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpuLim)}
	return p
}

// A resize is admitted against allocatable and the other pods'
// allocations: one that fits is checkpointed and in progress, one that
// does not waits as Deferred with the kubelet's message and the old
// resources.
func TestResizeAdmission(t *testing.T) {
	m, _ := newTestManager(t, critest.New(), nil)
	m.opts.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("4Gi")}
	other := withResources(testPod(corev1.RestartPolicyAlways, "a"), "1", "1")
	other.UID, other.Name = "other", "other"
	pod := withResources(testPod(corev1.RestartPolicyAlways, "a"), "100m", "200m")
	pod.Generation = 1
	m.mu.Lock()
	defer m.mu.Unlock()
	m.synced = true
	for _, p := range []*corev1.Pod{other, pod} {
		m.allocateLocked(p)
		m.pods[p.UID] = p
	}
	w := newWorker(m, pod.UID, pod)
	m.workers[pod.UID] = w

	fits := withResources(pod, "500m", "1")
	fits.Generation = 2
	if view := m.resizeLocked(fits); view != fits {
		t.Fatalf("a resize that fits does not run as asked: %v", view.Spec.Containers[0].Resources)
	}
	if got, _ := m.allocated.Get(pod.UID); !got.Equal(allocation.Of(fits)) {
		t.Errorf("checkpoint holds %v", got)
	}
	if c := w.resize.inProgress; c == nil || c.ObservedGeneration != 2 || w.resize.pending != nil {
		t.Errorf("after admission: %+v", w.resize)
	}
	m.pods[pod.UID] = fits

	tooBig := withResources(pod, "1500m", "2")
	tooBig.Generation = 3
	view := m.resizeLocked(tooBig)
	if q := view.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU]; q.String() != "500m" {
		t.Errorf("a deferred resize runs with %s, want the allocated 500m", q.String())
	}
	c := w.resize.pending
	if c == nil || c.Reason != corev1.PodReasonDeferred || c.ObservedGeneration != 3 ||
		c.Message != "Node didn't have enough resource: cpu, requested: 1500, used: 1000, capacity: 2000" {
		t.Errorf("pending %+v", c)
	}
	if _, queued := m.desired[pod.UID]; !queued {
		t.Error("a deferred resize is not queued for retry")
	}
	// The other pod goes: the retry admits it.
	delete(m.pods, other.UID)
	m.retryResizesLocked()
	if m.pods[pod.UID] != tooBig || w.resize.pending != nil || w.resize.inProgress.ObservedGeneration != 3 {
		t.Errorf("after the other pod went: pending %+v, in progress %+v", w.resize.pending, w.resize.inProgress)
	}

	// Pod-level resources resize as the containers' do.
	podLevel := tooBig.DeepCopy()
	podLevel.Generation = 4
	podLevel.Spec.Resources = &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}}
	if view := m.resizeLocked(podLevel); view != podLevel || w.resize.pending != nil || w.resize.inProgress.ObservedGeneration != 4 {
		t.Errorf("a pod-level resize: pending %+v, in progress %+v", w.resize.pending, w.resize.inProgress)
	}
	m.pods[pod.UID] = podLevel

	// Back to what is allocated while a resize waits: nothing pending.
	huge := withResources(podLevel, "1900m", "2")
	huge.Generation = 5
	m.pods[other.UID] = other
	if m.resizeLocked(huge); w.resize.pending == nil {
		t.Fatal("not deferred")
	}
	m.resizeLocked(podLevel)
	if w.resize.pending != nil {
		t.Errorf("pending after the spec went back: %+v", w.resize.pending)
	}
}

// Pending resizes are retried in the kubelet's order: those asking no
// more first, then by priority, then Guaranteed, then the longest waiting.
func TestPendingResizeOrder(t *testing.T) {
	m, _ := newTestManager(t, critest.New(), nil)
	m.mu.Lock()
	defer m.mu.Unlock()
	base := time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)
	mk := func(uid string, prio int32, cpuFrom, cpuTo string, guaranteed bool, pendingFor time.Duration) *corev1.Pod {
		lim := "2"
		if guaranteed {
			lim = cpuFrom
		}
		p := withResources(testPod(corev1.RestartPolicyAlways, "a"), cpuFrom, lim)
		p.UID, p.Name, p.Spec.Priority = types.UID(uid), uid, &prio
		if guaranteed {
			c := &p.Spec.Containers[0]
			c.Resources.Requests[corev1.ResourceMemory] = resource.MustParse("64Mi")
			c.Resources.Limits[corev1.ResourceMemory] = resource.MustParse("64Mi")
		}
		m.pods[p.UID] = p
		w := newWorker(m, p.UID, p)
		m.workers[p.UID] = w
		if pendingFor > 0 {
			at := metav1.NewTime(base.Add(-pendingFor))
			w.resize.pending = &corev1.PodCondition{Type: corev1.PodResizePending, Reason: corev1.PodReasonDeferred, LastTransitionTime: at}
		}
		want := p.DeepCopy()
		want.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse(cpuTo)
		if guaranteed {
			want.Spec.Containers[0].Resources.Limits[corev1.ResourceCPU] = resource.MustParse(cpuTo)
		}
		return want
	}
	pending := []*corev1.Pod{
		mk("grows-low", 0, "100m", "900m", false, time.Minute),
		mk("grows-high", 1000, "100m", "900m", false, time.Second),
		mk("grows-guaranteed", 0, "1", "2", true, time.Second),
		mk("grows-waited-longest", 0, "100m", "900m", false, time.Hour),
		mk("grows-not-pending-yet", 0, "100m", "900m", false, 0),
		mk("shrinks", 0, "1", "500m", false, 0),
	}
	m.sortPendingResizesLocked(pending)
	var got []string
	for _, p := range pending {
		got = append(got, p.Name)
	}
	want := "shrinks grows-high grows-guaranteed grows-waited-longest grows-low grows-not-pending-yet"
	if strings.Join(got, " ") != want {
		t.Errorf("order\n got %s\nwant %s", strings.Join(got, " "), want)
	}
}

// A resize is not judged before every source has sent its pods (the
// others' allocations are not all known): it waits, with no condition,
// and is judged by the first complete sync.
func TestResizeWaitsForSources(t *testing.T) {
	m, _ := newTestManager(t, critest.New(), nil)
	m.opts.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("4Gi")}
	pod := withResources(testPod(corev1.RestartPolicyAlways, "a"), "100m", "200m")
	m.mu.Lock()
	defer m.mu.Unlock()
	m.allocateLocked(pod)
	m.pods[pod.UID] = pod
	w := newWorker(m, pod.UID, pod)
	m.workers[pod.UID] = w
	resized := withResources(pod, "500m", "1")
	view := m.resizeLocked(resized)
	if view == resized || w.resize.pending != nil || w.resize.inProgress != nil {
		t.Fatalf("judged before the sources synced: pending %+v, in progress %+v", w.resize.pending, w.resize.inProgress)
	}
	if m.desired[pod.UID] != resized {
		t.Fatal("not queued")
	}
	if m.retryResizesLocked() {
		t.Error("retried before the sources synced")
	}
	m.synced = true
	if !m.retryResizesLocked() || m.pods[pod.UID] != resized || w.resize.inProgress == nil {
		t.Errorf("not admitted once synced: in progress %+v", w.resize.inProgress)
	}
}

// An admitted pod whose checkpoint entry is lost is judged against what
// it was admitted with, not given its spec unchecked.
func TestResizeWithoutCheckpointEntryIsAdmitted(t *testing.T) {
	m, _ := newTestManager(t, critest.New(), nil)
	m.opts.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("4Gi")}
	pod := withResources(testPod(corev1.RestartPolicyAlways, "a"), "100m", "200m")
	m.mu.Lock()
	defer m.mu.Unlock()
	m.synced = true
	m.pods[pod.UID] = pod // admitted; its checkpoint write failed
	w := newWorker(m, pod.UID, pod)
	m.workers[pod.UID] = w
	tooBig := withResources(pod, "1500m", "2")
	if view := m.resizeLocked(tooBig); view == tooBig {
		t.Fatal("a resize above allocatable ran unjudged")
	}
	if c := w.resize.pending; c == nil || c.Reason != corev1.PodReasonDeferred {
		t.Errorf("pending %+v", c)
	}
	if got, ok := m.allocated.Get(pod.UID); ok && got.Equal(allocation.Of(tooBig)) {
		t.Error("the refused resize was checkpointed")
	}
}

// An agent restarted with a running pod takes what the checkpoint says
// it was given, not its spec: the spec's resize is admitted afterwards.
func TestRestartedAgentRunsWhatWasAllocated(t *testing.T) {
	root := t.TempDir()
	m, _ := newTestManager(t, critest.New(), nil)
	store := allocation.Open(layout.Root(root).AllocatedPodsState(), m.log)
	pod := withResources(testPod(corev1.RestartPolicyAlways, "a"), "100m", "200m")
	if err := store.Set(pod.UID, allocation.Of(pod)); err != nil {
		t.Fatal(err)
	}
	m.allocated = allocation.Open(layout.Root(root).AllocatedPodsState(), m.log)
	resized := withResources(pod, "300m", "400m")
	m.mu.Lock()
	defer m.mu.Unlock()
	view := m.allocatedViewLocked(resized, true)
	if q := view.Spec.Containers[0].Resources.Limits[corev1.ResourceCPU]; q.String() != "200m" {
		t.Errorf("a running pod re-admitted with %s, want the checkpoint's 200m", q.String())
	}
	if m.desired[pod.UID] != resized {
		t.Error("its resize is not queued")
	}
	if view := m.allocatedViewLocked(resized, false); view != resized {
		t.Error("a pod not running yet does not run its spec")
	}
}

// status.resources reads the runtime's values back as the kubelet does.
func TestStatusResourcesReadBack(t *testing.T) {
	alloc := corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("150m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("300m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
	}
	running := func(l *runtimeapi.LinuxContainerResources) *runtimeapi.ContainerStatus {
		return &runtimeapi.ContainerStatus{State: runtimeapi.ContainerState_CONTAINER_RUNNING, Resources: &runtimeapi.ContainerResources{Linux: l}}
	}
	got := statusResources(alloc, running(&runtimeapi.LinuxContainerResources{CpuShares: 102, CpuQuota: 20000, CpuPeriod: 100000, MemoryLimitInBytes: 96 << 20}))
	want := map[string]string{"requests.cpu": "100m", "requests.memory": "64Mi", "limits.cpu": "200m", "limits.memory": "96Mi"}
	for k, v := range want {
		list := got.Requests
		if strings.HasPrefix(k, "limits") {
			list = got.Limits
		}
		q := list[corev1.ResourceName(strings.SplitN(k, ".", 2)[1])]
		if q.Cmp(resource.MustParse(v)) != 0 {
			t.Errorf("%s = %s, want %s", k, q.String(), v)
		}
	}
	// At the minimums the allocation is shown: 5m reads back as 10m.
	small := corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1m")}, Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("5m")}}
	got = statusResources(small, running(&runtimeapi.LinuxContainerResources{CpuShares: 2, CpuQuota: 1000, CpuPeriod: 100000}))
	if q := got.Limits[corev1.ResourceCPU]; q.String() != "5m" {
		t.Errorf("limit at the minimum reads %s", q.String())
	}
	if q := got.Requests[corev1.ResourceCPU]; q.String() != "1m" {
		t.Errorf("request at the minimum reads %s", q.String())
	}
	// Not running: the allocation.
	if got := statusResources(alloc, &runtimeapi.ContainerStatus{State: runtimeapi.ContainerState_CONTAINER_EXITED}); !got.Limits.Cpu().Equal(resource.MustParse("300m")) {
		t.Errorf("exited container: %v", got)
	}
}

func TestResizeEventMessage(t *testing.T) {
	pod := withResources(testPod(corev1.RestartPolicyAlways, "a"), "100m", "200m")
	pod.Generation = 7
	got := resizeMessage(pod, "Pod resize Deferred", "Node didn't have enough resource: cpu")
	want := `Pod resize Deferred: {"containers":[{"name":"a","resources":{"limits":{"cpu":"200m"},"requests":{"cpu":"100m"}}}],"generation":7,"error":"Node didn't have enough resource: cpu"}`
	if got != want {
		t.Errorf("message\n got %s\nwant %s", got, want)
	}
}

// RestartContainer restarts for a change of the resource it names, its
// request included (which never reaches the runtime), told from what the
// container was created with.
func TestResizeRestartFollowsThePolicy(t *testing.T) {
	m, _ := newTestManager(t, critest.New(), nil)
	w := newWorker(m, "uid1", nil)
	created := withResources(testPod(corev1.RestartPolicyAlways, "a"), "100m", "200m")
	c := &created.Spec.Containers[0]
	c.Resources.Requests[corev1.ResourceMemory] = resource.MustParse("32Mi")
	c.ResizePolicy = []corev1.ContainerResizePolicy{{ResourceName: corev1.ResourceCPU, RestartPolicy: corev1.NotRequired},
		{ResourceName: corev1.ResourceMemory, RestartPolicy: corev1.RestartContainer}}
	rec := &runtimeapi.ContainerStatus{State: runtimeapi.ContainerState_CONTAINER_RUNNING,
		Annotations: map[string]string{cri.AnnotationContainerResources: criconfig.EffectiveResources(created, c).String()}}
	for _, tc := range []struct {
		name    string
		change  func(*corev1.Container)
		restart bool
	}{
		{"nothing", func(*corev1.Container) {}, false},
		{"the cpu limit (NotRequired)", func(c *corev1.Container) { c.Resources.Limits[corev1.ResourceCPU] = resource.MustParse("300m") }, false},
		{"the memory request (RestartContainer)", func(c *corev1.Container) { c.Resources.Requests[corev1.ResourceMemory] = resource.MustParse("48Mi") }, true},
	} {
		p := created.DeepCopy()
		tc.change(&p.Spec.Containers[0])
		if got := w.needsResizeRestart(p, &p.Spec.Containers[0], rec); got != tc.restart {
			t.Errorf("%s: restart %v, want %v", tc.name, got, tc.restart)
		}
	}
	// The pod's memory limit, which the container inherits, restarts it too.
	p := created.DeepCopy()
	p.Spec.Resources = &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}}
	if !w.needsResizeRestart(p, &p.Spec.Containers[0], rec) {
		t.Error("a new pod-level memory limit did not restart a container without its own")
	}
}

// failingUpdates refuses every cgroup update.
type failingUpdates struct{ nopCgroups }

func (failingUpdates) Update(cgroups.Name, *cgroups.ResourceConfig) error {
	return errors.New("write refused")
}

// The runtime hears of a pod cgroup resize before it is written, without
// the overhead and with the overhead apart; a write that fails tells it
// the old values back.
func TestPodResizeTellsTheRuntime(t *testing.T) {
	rt := critest.New()
	m, _ := newTestManager(t, rt, nil)
	pod := withResources(testPod(corev1.RestartPolicyAlways, "a"), "500m", "500m")
	pod.Spec.Overhead = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("16Mi")}
	w := newWorker(m, pod.UID, pod)
	oldMem, newMem, shares := int64(80<<20), int64(144<<20), uint64(512)
	pr := &podResize{perPodCgs: true, want: &cgroups.ResourceConfig{Memory: &newMem, CPUShares: &shares},
		current: &cgroups.ResourceConfig{Memory: &oldMem, CPUShares: &shares}}

	m.tree = cgroups.NewTree(failingUpdates{}, cgroups.TreeConfig{PerQOS: true})
	if err := w.resizePod(context.Background(), pod, "sb", pr, corev1.ResourceMemory); err == nil {
		t.Fatal("a refused cgroup write was not an error")
	}
	calls := rt.Calls("UpdatePodSandboxResources")
	if len(calls) != 2 {
		t.Fatalf("%d calls, want the resize and its rollback", len(calls))
	}
	if got := calls[0].Resources.MemoryLimitInBytes; got != 128<<20 {
		t.Errorf("told %d, want the new limit less the overhead (128Mi)", got)
	}
	if got := calls[0].Overhead.MemoryLimitInBytes; got != 16<<20 {
		t.Errorf("overhead told %d, want 16Mi", got)
	}
	if got := calls[1].Resources.MemoryLimitInBytes; got != 64<<20 {
		t.Errorf("rollback told %d, want the old 64Mi", got)
	}
	if *pr.current.Memory != oldMem {
		t.Error("a failed step moved what the runtime was told")
	}

	m.tree = cgroups.NewTree(nopCgroups{}, cgroups.TreeConfig{PerQOS: true})
	if err := w.resizePod(context.Background(), pod, "sb", pr, corev1.ResourceMemory); err != nil {
		t.Fatal(err)
	}
	if *pr.current.Memory != newMem {
		t.Error("a step done is not what the runtime holds now")
	}
}

// A regular init container is resized in place while it runs (1.37's
// InPlacePodVerticalScalingInitContainers), never restarted for it.
func TestRegularInitContainerResizesInPlace(t *testing.T) {
	m, _ := newTestManager(t, critest.New(), nil)
	w := newWorker(m, "uid1", nil)
	created := withResources(testPod(corev1.RestartPolicyAlways, "a"), "100m", "200m")
	created.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "img", Resources: created.Spec.Containers[0].Resources,
		ResizePolicy: []corev1.ContainerResizePolicy{{ResourceName: corev1.ResourceCPU, RestartPolicy: corev1.RestartContainer}}}}
	init := &created.Spec.InitContainers[0]
	if resizableContainer(created, "init") != init {
		t.Fatal("a regular init container is not resizable")
	}
	rec := &runtimeapi.ContainerStatus{State: runtimeapi.ContainerState_CONTAINER_RUNNING,
		Annotations: map[string]string{cri.AnnotationContainerResources: criconfig.EffectiveResources(created, init).String()}}
	resized := created.DeepCopy()
	resized.Spec.InitContainers[0].Resources.Limits[corev1.ResourceCPU] = resource.MustParse("300m")
	if w.needsResizeRestart(resized, &resized.Spec.InitContainers[0], rec) {
		t.Error("a regular init container restarts for its resize")
	}
}
