package eviction

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"nodeagent/internal/metrics"
)

func TestParseThresholds(t *testing.T) {
	ts, err := ParseThresholds(Config{
		Hard:            map[string]string{"memory.available": "100Mi", "nodefs.available": "10%", "imagefs.available": "0%"},
		Soft:            map[string]string{"memory.available": "500Mi"},
		SoftGracePeriod: map[string]string{"memory.available": "30s"},
		MinimumReclaim:  map[string]string{"memory.available": "50Mi"},
		EnforcePods:     true,
	})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Threshold{}
	for _, x := range ts {
		got[x.String()] = x
	}
	for _, want := range []string{"evictionHard memory.available<100Mi", "evictionHard nodefs.available<10%", "evictionSoft memory.available<500Mi", "evictionHard allocatableMemory.available<100Mi"} {
		if _, ok := got[want]; !ok {
			t.Errorf("missing %s in %v", want, ts)
		}
	}
	if len(ts) != 4 {
		t.Errorf("imagefs.available 0%% must be ignored: %v", ts)
	}
	if s := got["evictionSoft memory.available<500Mi"]; s.GracePeriod != 30*time.Second || s.MinReclaim == nil || s.MinReclaim.Of(0) != 50<<20 {
		t.Errorf("soft threshold %+v", s)
	}
	if v := got["evictionHard nodefs.available<10%"].Value.Of(1000); v != 100 {
		t.Errorf("10%% of 1000 = %d", v)
	}

	for cfg, want := range map[*Config]string{
		{Hard: map[string]string{"memory.free": "1Gi"}}:                `evictionHard.memory.free: invalid value "1Gi": unknown eviction signal`,
		{Hard: map[string]string{"memory.available": "-1Gi"}}:          `evictionHard.memory.available: invalid value "-1Gi": eviction threshold must be positive`,
		{Hard: map[string]string{"memory.available": "120%"}}:          `percentage must be between 0% and 100%`,
		{Soft: map[string]string{"memory.available": "1Gi"}}:           `grace period must be specified for the soft eviction threshold`,
		{SoftGracePeriod: map[string]string{"memory.available": "1m"}}: `no evictionSoft threshold for this signal`,
		{Hard: map[string]string{"memory.available": "lots"}}:          `evictionHard.memory.available: invalid value "lots": must be a quantity`,
		// NaN passes every comparison: it used to disable the threshold silently.
		{Hard: map[string]string{"memory.available": "NaN%"}}:                                                               `evictionHard.memory.available: invalid value "NaN%": percentage must be between 0% and 100%`,
		{Hard: map[string]string{"nodefs.available": "Inf%"}}:                                                               `evictionHard.nodefs.available: invalid value "Inf%": percentage must be between 0% and 100%`,
		{Soft: map[string]string{"memory.available": "-Inf%"}}:                                                              `evictionSoft.memory.available: invalid value "-Inf%": percentage must be between 0% and 100%`,
		{Hard: map[string]string{"memory.available": "1Gi"}, MinimumReclaim: map[string]string{"memory.available": "nan%"}}: `evictionMinimumReclaim.memory.available: invalid value "nan%"`,
		{Hard: map[string]string{"memory.available": "1e19"}}:                                                               `evictionHard.memory.available: invalid value "1e19": must be at most 9223372036854775807`,
	} {
		if _, err := ParseThresholds(*cfg); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%+v: got %v, want %q", *cfg, err, want)
		}
	}
}

func TestCheckAgainstCapacity(t *testing.T) {
	ts, _ := ParseThresholds(Config{Hard: map[string]string{"memory.available": "200Gi", "nodefs.available": "10%"}})
	err := CheckAgainstCapacity(ts, map[Signal]int64{MemoryAvailable: 24 << 30, NodeFsAvailable: 100 << 30})
	if err == nil || !strings.Contains(err.Error(), "evictionHard memory.available<200Gi is at or above the node's capacity for it (24Gi)") {
		t.Errorf("got %v", err)
	}
	if strings.Contains(err.Error(), "nodefs") {
		t.Errorf("a sane threshold refused: %v", err)
	}
}

func pod(name string, class corev1.PodQOSClass, priority int32) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(name)}}
	p.Spec.Priority = &priority
	c := corev1.Container{Name: "c"}
	switch class {
	case corev1.PodQOSGuaranteed:
		c.Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("100Mi"), corev1.ResourceCPU: resource.MustParse("100m")}
		c.Resources.Requests = c.Resources.Limits
	case corev1.PodQOSBurstable:
		c.Resources.Requests = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("100Mi")}
	}
	p.Spec.Containers = []corev1.Container{c}
	return p
}

func names(cs []Candidate) string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Pod.Name)
	}
	return strings.Join(out, " ")
}

func TestRanking(t *testing.T) {
	mi := int64(1 << 20)
	cands := func() []Candidate {
		return []Candidate{
			{Pod: pod("guaranteed", corev1.PodQOSGuaranteed, 0), Usage: 90 * mi, Request: 100 * mi, HasStats: true},
			{Pod: pod("burstable-over", corev1.PodQOSBurstable, 0), Usage: 150 * mi, Request: 100 * mi, HasStats: true},
			{Pod: pod("burstable-under", corev1.PodQOSBurstable, 0), Usage: 50 * mi, Request: 100 * mi, HasStats: true},
			{Pod: pod("besteffort-high", corev1.PodQOSBestEffort, 1000), Usage: 300 * mi, HasStats: true},
			{Pod: pod("besteffort-low", corev1.PodQOSBestEffort, 0), Usage: 10 * mi, HasStats: true},
			{Pod: pod("nostats", corev1.PodQOSGuaranteed, 0), Request: 100 * mi},
		}
	}
	c := cands()
	Rank(c, corev1.ResourceMemory, RankKubelet)
	// Over request first (by priority, then overage), then the rest by priority then overage.
	if got, want := names(c), "nostats burstable-over besteffort-low besteffort-high guaranteed burstable-under"; got != want {
		t.Errorf("kubelet ranking:\n got %s\nwant %s", got, want)
	}
	c = cands()
	Rank(c, corev1.ResourceMemory, RankQoS)
	if got, want := names(c), "nostats besteffort-low besteffort-high burstable-over burstable-under guaranteed"; got != want {
		t.Errorf("qos ranking:\n got %s\nwant %s", got, want)
	}
	c = cands()[1:5]
	Rank(c, corev1.ResourceMemory, RankKubelet)
	if got := names(Select(c, 155*mi)); got != "burstable-over besteffort-low" {
		t.Errorf("select 155Mi: %s", got)
	}
	if got := names(Select(c, 10*mi)); got != "burstable-over" {
		t.Errorf("select 10Mi: %s", got)
	}
}

type fakeSource struct {
	mu  sync.Mutex
	obs Observations
}

func (f *fakeSource) set(s Signal, avail, capacity int64, at time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.obs[s] = Observation{Available: avail, Capacity: capacity, Time: at}
}

func (f *fakeSource) Observe(context.Context) (Observations, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := Observations{}
	for k, v := range f.obs {
		out[k] = v
	}
	return out, nil
}

// fakePods is the pod manager and pod usage of the tests. Evict is
// called from parallel goroutines (execute kills victims at once).
type fakePods struct {
	mu       sync.Mutex
	pods     []*corev1.Pod
	usage    map[types.UID]int64
	disk     map[types.UID]int64
	empty    map[string]int64    // uid/volume
	emptyErr map[string]error    // uid/volume: cannot be measured
	layers   map[types.UID]int64 // writable layers
	// containerDisk is containers' logs and layers, by uid/container.
	containerDisk map[string]int64
	procs         map[types.UID]int64 // processes, in container "c"
	evicted       map[types.UID]int64 // grace
	msgs          map[types.UID]string
	orders        map[types.UID]Eviction
	killNow       map[types.UID]bool
	// kill answers a KillNow eviction (nil: the node stops pods
	// gracefully, nothing is killed at once).
	kill func(uid types.UID) Kill
}

func (f *fakePods) Active() []*corev1.Pod {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*corev1.Pod
	for _, p := range f.pods {
		if _, gone := f.evicted[p.UID]; !gone {
			out = append(out, p)
		}
	}
	return out
}

func (f *fakePods) Evict(uid types.UID, e Eviction) (Kill, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.evicted[uid] = e.Grace
	f.msgs[uid] = e.Message
	if f.orders == nil {
		f.orders = map[types.UID]Eviction{}
	}
	f.orders[uid] = e
	if f.killNow == nil {
		f.killNow = map[types.UID]bool{}
	}
	f.killNow[uid] = e.KillNow
	if e.KillNow && f.kill != nil {
		return f.kill(uid), nil
	}
	return Kill{}, nil
}

func (f *fakePods) Memory(p *corev1.Pod) (int64, bool) { u, ok := f.usage[p.UID]; return u, ok }

func (f *fakePods) Disk(p *corev1.Pod) (int64, int64, bool) {
	d, ok := f.disk[p.UID]
	return d, d / 4096, ok
}

func (f *fakePods) ImageFs(p *corev1.Pod) (int64, int64, bool) {
	d, ok := f.layers[p.UID]
	return d, d / 4096, ok
}

// Containers puts the whole pod's memory and processes in its one
// container "c".
func (f *fakePods) Containers(p *corev1.Pod) map[string]ContainerUsage {
	u, ok := f.usage[p.UID]
	n, ok2 := f.procs[p.UID]
	if !ok && !ok2 {
		return nil
	}
	return map[string]ContainerUsage{"c": {WorkingSet: u, Processes: n}}
}

// ContainerDisk is containers' ephemeral storage, by uid/container.
func (f *fakePods) ContainerDisk(p *corev1.Pod) (map[string]int64, bool) {
	out := map[string]int64{}
	for k, v := range f.containerDisk {
		if uid, name, _ := strings.Cut(k, "/"); uid == string(p.UID) {
			out[name] = v
		}
	}
	return out, true
}

func (f *fakePods) EmptyDir(p *corev1.Pod, v string) (int64, error) {
	if err := f.emptyErr[string(p.UID)+"/"+v]; err != nil {
		return 0, err
	}
	return f.empty[string(p.UID)+"/"+v], nil
}

func TestManagerEvictsTheSmallestSetAndReportsPressure(t *testing.T) {
	mi := int64(1 << 20)
	clock := clocktesting.NewFakeClock(time.Unix(1000, 0))
	src := &fakeSource{obs: Observations{}}
	pods := &fakePods{
		pods:    []*corev1.Pod{pod("hog", corev1.PodQOSBestEffort, 0), pod("small", corev1.PodQOSBestEffort, 0), pod("guaranteed", corev1.PodQOSGuaranteed, 0)},
		usage:   map[types.UID]int64{"hog": 400 * mi, "small": 5 * mi, "guaranteed": 90 * mi},
		evicted: map[types.UID]int64{}, msgs: map[types.UID]string{},
	}
	ts, _ := ParseThresholds(Config{Hard: map[string]string{"memory.available": "100Mi"}})
	m := NewManager(Options{Thresholds: ts, Pressure: NewPressure(5*time.Minute, clock), Clock: clock}, src, pods, pods)

	src.set(MemoryAvailable, 500*mi, 1000*mi, clock.Now())
	m.Synchronize(context.Background())
	if len(pods.evicted) != 0 || m.opts.Pressure.Conditions(clock.Now())[0].Status != corev1.ConditionFalse {
		t.Fatal("evicted or under pressure above the threshold")
	}
	if msg := m.opts.Pressure.Admit(pod("new", corev1.PodQOSBestEffort, 0)); msg != "" {
		t.Errorf("admission refused without pressure: %s", msg)
	}

	src.set(MemoryAvailable, 60*mi, 1000*mi, clock.Now()) // 40Mi short
	m.Synchronize(context.Background())
	if len(pods.evicted) != 1 || pods.evicted["hog"] != 1 {
		t.Fatalf("evicted %v, want only the hog with grace 1", pods.evicted)
	}
	if msg := pods.msgs["hog"]; msg != "The node was low on resource: memory. Threshold quantity: 100Mi, available: 60Mi. Container c was using 400Mi, request is 0, has larger consumption of memory. " {
		t.Errorf("message %q", msg)
	}
	// The Evicted event's annotations, the kubelet's keys and formats.
	if o := pods.orders["hog"]; !o.Disruption || o.Annotations["starved_resource"] != "memory" ||
		o.Annotations["offending_containers"] != "c" || o.Annotations["offending_containers_usage"] != "400Mi" {
		t.Errorf("eviction order %+v", o)
	}
	cond := m.opts.Pressure.Conditions(clock.Now())[0]
	if cond.Type != corev1.NodeMemoryPressure || cond.Status != corev1.ConditionTrue || cond.Reason != "KubeletHasInsufficientMemory" {
		t.Errorf("condition %+v", cond)
	}
	if msg := m.opts.Pressure.Admit(pod("new", corev1.PodQOSBestEffort, 0)); msg != "The node had condition: [MemoryPressure]. " {
		t.Errorf("BestEffort admission under MemoryPressure: %q", msg)
	}
	if msg := m.opts.Pressure.Admit(pod("new", corev1.PodQOSBurstable, 0)); msg != "" {
		t.Errorf("Burstable refused under MemoryPressure alone: %q", msg)
	}

	// The hog is still terminating and the reading has not moved: its usage
	// is already counted as coming back, so nothing else is evicted.
	pods.evicted = map[types.UID]int64{}
	m.pending["hog"] = pendingEviction{pod: pods.pods[0], signal: MemoryAvailable, usage: 400 * mi, since: clock.Now(), trace: 1}
	pods.pods = pods.pods[:3]
	clock.Step(time.Second)
	src.set(MemoryAvailable, 60*mi, 1000*mi, clock.Now())
	m.Synchronize(context.Background())
	if len(pods.evicted) != 0 {
		t.Errorf("evicted %v while the first eviction is in flight", pods.evicted)
	}

	// The hog's memory drains; the pressure is relieved and its trace is
	// stamped. The condition stays for the transition period.
	pods.usage["hog"] = 0
	src.set(MemoryAvailable, 600*mi, 1000*mi, clock.Now())
	m.Synchronize(context.Background())
	if tr := m.Traces(); len(tr) != 1 || tr[0].FreedAt.IsZero() {
		t.Errorf("trace not stamped when the victim drained: %+v", tr)
	}
	clock.Step(4 * time.Minute)
	if m.opts.Pressure.Conditions(clock.Now())[0].Status != corev1.ConditionTrue {
		t.Error("MemoryPressure cleared before the transition period")
	}
	clock.Step(time.Minute)
	if m.opts.Pressure.Conditions(clock.Now())[0].Status != corev1.ConditionFalse {
		t.Error("MemoryPressure kept after the transition period")
	}
	if tr := m.Traces(); len(tr) != 1 || len(tr[0].Victims) != 1 || tr[0].Victims[0].QoS != corev1.PodQOSBestEffort {
		t.Errorf("traces %+v", tr)
	}
	text, err := metrics.Text(m.Metrics)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`kubelet_evictions{eviction_signal="memory.available"} 1`, "nodeagent_eviction_decision_seconds_count 1", "nodeagent_eviction_reclaim_seconds_count 1"} {
		if !strings.Contains(text, want) {
			t.Errorf("metrics lack %q:\n%s", want, text)
		}
	}
}

func TestSoftThresholdWaitsForItsGracePeriod(t *testing.T) {
	mi := int64(1 << 20)
	clock := clocktesting.NewFakeClock(time.Unix(1000, 0))
	src := &fakeSource{obs: Observations{}}
	grace := int64(600)
	p := pod("hog", corev1.PodQOSBestEffort, 0)
	p.Spec.TerminationGracePeriodSeconds = &grace
	pods := &fakePods{pods: []*corev1.Pod{p}, usage: map[types.UID]int64{"hog": 400 * mi}, evicted: map[types.UID]int64{}, msgs: map[types.UID]string{}}
	ts, _ := ParseThresholds(Config{Soft: map[string]string{"memory.available": "100Mi"}, SoftGracePeriod: map[string]string{"memory.available": "30s"}})
	m := NewManager(Options{Thresholds: ts, MaxPodGracePeriod: 20, Pressure: NewPressure(time.Minute, clock), Clock: clock}, src, pods, pods)
	src.set(MemoryAvailable, 50*mi, 1000*mi, clock.Now())
	m.Synchronize(context.Background())
	if len(pods.evicted) != 0 {
		t.Fatal("soft threshold acted on before its grace period")
	}
	if m.opts.Pressure.Conditions(clock.Now())[0].Status != corev1.ConditionTrue {
		t.Error("the condition must show at once, grace or not")
	}
	clock.Step(30 * time.Second)
	m.Synchronize(context.Background())
	if pods.evicted["hog"] != 20 {
		t.Errorf("evicted %v, want the hog with min(evictionMaxPodGracePeriod 20, pod 600)", pods.evicted)
	}
}

func TestCriticalAndMissingData(t *testing.T) {
	mi := int64(1 << 20)
	clock := clocktesting.NewFakeClock(time.Unix(1000, 0))
	src := &fakeSource{obs: Observations{}}
	critical := pod("critical", corev1.PodQOSBestEffort, 2000001000)
	pods := &fakePods{pods: []*corev1.Pod{critical}, usage: map[types.UID]int64{"critical": 400 * mi}, evicted: map[types.UID]int64{}, msgs: map[types.UID]string{}}
	ts, _ := ParseThresholds(Config{Hard: map[string]string{"memory.available": "100Mi", "nodefs.available": "10%"}})
	m := NewManager(Options{Thresholds: ts, Pressure: NewPressure(time.Minute, clock), Clock: clock}, src, pods, pods)
	m.Synchronize(context.Background()) // no observations at all
	for _, c := range m.opts.Pressure.Conditions(clock.Now()) {
		if c.Status != corev1.ConditionFalse {
			t.Errorf("pressure without data: %+v", c)
		}
	}
	src.set(MemoryAvailable, 10*mi, 1000*mi, clock.Now())
	m.Synchronize(context.Background())
	if len(pods.evicted) != 0 {
		t.Error("a critical pod was evicted")
	}
	if msg := m.opts.Pressure.Admit(pod("new", corev1.PodQOSGuaranteed, 2000001000)); msg != "" {
		t.Errorf("critical pod refused: %s", msg)
	}
}

// admittingPods calls back into the manager the way the pod manager does
// (admission while holding its own lock).
type admittingPods struct {
	*fakePods
	m *Manager
}

func (a admittingPods) Active() []*corev1.Pod {
	a.m.opts.Pressure.Admit(pod("probe", corev1.PodQOSBestEffort, 0))
	return a.fakePods.Active()
}

func (a admittingPods) Evict(uid types.UID, e Eviction) (Kill, error) {
	a.m.opts.Pressure.Admit(pod("probe", corev1.PodQOSBestEffort, 0))
	return a.fakePods.Evict(uid, e)
}

func TestSynchronizeNeverCallsThePodsWithItsLockHeld(t *testing.T) {
	mi := int64(1 << 20)
	clock := clocktesting.NewFakeClock(time.Unix(1000, 0))
	src := &fakeSource{obs: Observations{}}
	fp := &fakePods{pods: []*corev1.Pod{pod("hog", corev1.PodQOSBestEffort, 0)}, usage: map[types.UID]int64{"hog": 400 * mi}, evicted: map[types.UID]int64{}, msgs: map[types.UID]string{}}
	ts, _ := ParseThresholds(Config{Hard: map[string]string{"memory.available": "100Mi"}})
	ap := admittingPods{fakePods: fp}
	m := NewManager(Options{Thresholds: ts, Pressure: NewPressure(time.Minute, clock), Clock: clock}, src, ap, fp)
	ap.m = m
	m.pods = ap
	src.set(MemoryAvailable, 10*mi, 1000*mi, clock.Now())
	done := make(chan struct{})
	go func() { m.Synchronize(context.Background()); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Synchronize deadlocked calling back into the pod manager")
	}
	if len(fp.evicted) != 1 {
		t.Errorf("evicted %v", fp.evicted)
	}
}

func TestDiskPressureReclaimsBeforeEvicting(t *testing.T) {
	gi := int64(1 << 30)
	clock := clocktesting.NewFakeClock(time.Unix(1000, 0))
	src := &fakeSource{obs: Observations{}}
	pods := &fakePods{
		pods:    []*corev1.Pod{pod("writer", corev1.PodQOSBestEffort, 0), pod("quiet", corev1.PodQOSBestEffort, 0)},
		disk:    map[types.UID]int64{"writer": 5 * gi, "quiet": gi / 100},
		evicted: map[types.UID]int64{}, msgs: map[types.UID]string{},
	}
	ts, _ := ParseThresholds(Config{Hard: map[string]string{"nodefs.available": "10%"}})
	reclaims := 0
	freed := int64(0)
	m := NewManager(Options{Thresholds: ts, Pressure: NewPressure(time.Minute, clock), Clock: clock,
		Reclaim: func(context.Context, Signal) (string, bool) {
			reclaims++
			src.set(NodeFsAvailable, 8*gi+freed, 100*gi, clock.Now())
			return "removed unused images", false
		}}, src, pods, pods)

	// Images free enough: nothing is evicted.
	freed = 3 * gi
	src.set(NodeFsAvailable, 8*gi, 100*gi, clock.Now())
	m.Synchronize(context.Background())
	if reclaims != 1 || len(pods.evicted) != 0 {
		t.Fatalf("reclaims %d evicted %v: reclaim alone was enough", reclaims, pods.evicted)
	}
	if m.opts.Pressure.Conditions(clock.Now())[1].Status != corev1.ConditionTrue {
		t.Error("no DiskPressure while the threshold was met")
	}
	if msg := m.opts.Pressure.Admit(pod("new", corev1.PodQOSGuaranteed, 0)); msg != "The node had condition: [DiskPressure]. " {
		t.Errorf("admission under DiskPressure: %q", msg)
	}

	// Not enough: the pod holding the most goes.
	freed = 0
	clock.Step(time.Second)
	src.set(NodeFsAvailable, 8*gi, 100*gi, clock.Now())
	m.Synchronize(context.Background())
	if len(pods.evicted) != 1 || pods.evicted["writer"] != 1 {
		t.Fatalf("evicted %v, want the writer", pods.evicted)
	}
	if tr := m.Traces(); len(tr) != 1 || tr[0].Reclaimed != "removed unused images" || tr[0].Signal != string(NodeFsAvailable) {
		t.Errorf("trace %+v", tr)
	}
}

// diskWriterNode is a node under a fake clock whose one pod, "writer",
// holds 5 GiB of the node filesystem.
func diskWriterNode() (*clocktesting.FakeClock, *fakeSource, *fakePods) {
	return clocktesting.NewFakeClock(time.Unix(1000, 0)), &fakeSource{obs: Observations{}}, &fakePods{
		pods:    []*corev1.Pod{pod("writer", corev1.PodQOSBestEffort, 0)},
		disk:    map[types.UID]int64{"writer": 5 << 30},
		evicted: map[types.UID]int64{}, msgs: map[types.UID]string{},
	}
}

// A reclaim that removed something gets reclaimSettle for its space to
// show (the runtime frees a removed container's layer later), once per
// episode: a reclaim that removes something every round cannot hold the
// eviction off for longer.
func TestReclaimedSpaceGetsTimeToShow(t *testing.T) {
	gi := int64(1 << 30)
	clock, src, pods := diskWriterNode()
	ts, _ := ParseThresholds(Config{Hard: map[string]string{"nodefs.available": "10%"}})
	m := NewManager(Options{Thresholds: ts, Pressure: NewPressure(time.Minute, clock), Clock: clock,
		Reclaim: func(context.Context, Signal) (string, bool) { return "removed 1 dead containers", true }}, src, pods, pods)
	round := func(available int64) {
		src.set(NodeFsAvailable, available, 100*gi, clock.Now())
		m.Synchronize(context.Background())
	}

	// The removed container's layer shows a second later: nobody goes,
	// and the relief that lasts past the window ends the episode.
	round(8 * gi)
	for range int(reclaimSettle / time.Second) {
		clock.Step(time.Second)
		round(12 * gi)
	}
	if len(pods.evicted) != 0 {
		t.Fatalf("evicted %v while the reclaimed space was on its way", pods.evicted)
	}

	// A new episode whose reclaim never shows: the writer goes once
	// reclaimSettle has passed, not before.
	clock.Step(time.Second)
	for range int(reclaimSettle / time.Second) {
		round(8 * gi)
		if len(pods.evicted) != 0 {
			t.Fatalf("evicted %v within %s of the reclaim", pods.evicted, reclaimSettle)
		}
		clock.Step(time.Second)
	}
	round(8 * gi)
	if len(pods.evicted) != 1 {
		t.Fatalf("evicted %v %s after a reclaim whose space never showed, want the writer", pods.evicted, reclaimSettle)
	}
}

// A reclaim that relieves a soft threshold for a moment does not start its
// grace period over: the writer takes the freed space back within
// seconds, and is evicted once the reclaim's space had its time, as the
// upstream LocalStorageSoftEvictionNotOverwriteTerminationGracePeriodSeconds
// expects (the kubelet's reclaim reading never enters its bookkeeping).
func TestReclaimKeepsTheSoftGraceClock(t *testing.T) {
	gi := int64(1 << 30)
	clock, src, pods := diskWriterNode()
	ts, _ := ParseThresholds(Config{Soft: map[string]string{"nodefs.available": "10%"}, SoftGracePeriod: map[string]string{"nodefs.available": "30s"}})
	var relievedUntil time.Time
	m := NewManager(Options{Thresholds: ts, Pressure: NewPressure(time.Minute, clock), Clock: clock,
		Reclaim: func(context.Context, Signal) (string, bool) {
			if !relievedUntil.IsZero() {
				return "removed 0 unused images", false
			}
			relievedUntil = clock.Now().Add(3 * time.Second) // the writer takes it back in 3 s
			src.set(NodeFsAvailable, 11*gi, 100*gi, clock.Now())
			return "removed 16 unused images", true
		}}, src, pods, pods)
	start := clock.Now()
	for clock.Since(start) <= time.Minute && len(pods.evicted) == 0 {
		available := 8 * gi
		if clock.Now().Before(relievedUntil) {
			available = 11 * gi
		}
		src.set(NodeFsAvailable, available, 100*gi, clock.Now())
		m.Synchronize(context.Background())
		clock.Step(time.Second)
	}
	if len(pods.evicted) != 1 {
		t.Fatalf("evicted %v a minute into the pressure, want the writer", pods.evicted)
	}
	// 30 s of grace, then the 5 s the images' space is given.
	if took := clock.Since(start) - time.Second; took != 30*time.Second+reclaimSettle {
		t.Errorf("the writer was evicted %s into the pressure, want %s", took, 30*time.Second+reclaimSettle)
	}
}

func TestEmptyDirOverItsSizeLimitIsEvicted(t *testing.T) {
	mi := int64(1 << 20)
	clock := clocktesting.NewFakeClock(time.Unix(1000, 0))
	limit := resource.MustParse("100Mi")
	p := pod("filler", corev1.PodQOSBestEffort, 0)
	p.Spec.Volumes = []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: &limit}}}}
	pods := &fakePods{pods: []*corev1.Pod{p}, empty: map[string]int64{"filler/scratch": 50 * mi}, evicted: map[types.UID]int64{}, msgs: map[types.UID]string{}}
	m := NewManager(Options{Pressure: NewPressure(time.Minute, clock), Clock: clock}, &fakeSource{obs: Observations{}}, pods, pods)
	m.Synchronize(context.Background())
	if len(pods.evicted) != 0 {
		t.Fatal("evicted under the limit")
	}
	pods.empty["filler/scratch"] = 150 * mi
	m.Synchronize(context.Background()) // within the 10 s period: not checked yet
	if len(pods.evicted) != 0 {
		t.Fatal("checked before the local storage period")
	}
	clock.Step(10 * time.Second)
	m.Synchronize(context.Background())
	if o := pods.orders["filler"]; o.Disruption || len(o.Annotations) != 0 {
		t.Errorf("a local storage limit's eviction has a DisruptionTarget or annotations: %+v", o)
	}
	if pods.evicted["filler"] != 1 || pods.msgs["filler"] != `Usage of EmptyDir volume "scratch" exceeds the limit "100Mi". ` {
		t.Errorf("evicted %v message %q", pods.evicted, pods.msgs["filler"])
	}
	for _, c := range m.opts.Pressure.Conditions(clock.Now()) {
		if c.Status != corev1.ConditionFalse {
			t.Errorf("an emptyDir over its limit is not node pressure: %+v", c)
		}
	}
}

// A pod over its ephemeral-storage limit (its containers' limits summed),
// and a pod whose container is over its own limit (logs and writable
// layer), are evicted with the kubelet's messages; pods within theirs,
// and pods without limits, are not.
func TestEphemeralStorageLimitsAreEnforced(t *testing.T) {
	mi := int64(1 << 20)
	clock := clocktesting.NewFakeClock(time.Unix(1000, 0))
	limited := func(name string, sidecar bool) *corev1.Pod {
		p := pod(name, corev1.PodQOSBestEffort, 0)
		c := corev1.Container{Name: "c", Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceEphemeralStorage: resource.MustParse("100Mi")}}}
		if sidecar {
			always := corev1.ContainerRestartPolicyAlways
			c.Name, c.RestartPolicy = "side", &always
			p.Spec.InitContainers = []corev1.Container{c}
			p.Spec.Containers = []corev1.Container{{Name: "main"}}
		} else {
			p.Spec.Containers = []corev1.Container{c}
		}
		return p
	}
	podOver, podUnder := limited("pod-over", false), limited("pod-under", false)
	containerOver, sidecarOver := limited("container-over", false), limited("sidecar-over", true)
	unlimited := pod("unlimited", corev1.PodQOSBestEffort, 0)
	unlimited.Spec.Containers = []corev1.Container{{Name: "c"}}
	pods := &fakePods{pods: []*corev1.Pod{podOver, podUnder, containerOver, sidecarOver, unlimited},
		disk: map[types.UID]int64{"pod-over": 101 * mi, "pod-under": 99 * mi, "container-over": 99 * mi, "sidecar-over": 99 * mi, "unlimited": 500 * mi},
		containerDisk: map[string]int64{"container-over/c": 101 * mi, "sidecar-over/side": 101 * mi, "sidecar-over/main": 0,
			"pod-under/c": 99 * mi, "unlimited/c": 500 * mi},
		evicted: map[types.UID]int64{}, msgs: map[types.UID]string{}}
	m := NewManager(Options{Pressure: NewPressure(time.Minute, clock), Clock: clock}, &fakeSource{obs: Observations{}}, pods, pods)
	clock.Step(10 * time.Second)
	m.Synchronize(context.Background())
	want := map[types.UID]string{
		"pod-over":       "Pod ephemeral local storage usage exceeds the total limit of containers 100Mi. ",
		"container-over": `Container c exceeded its local ephemeral storage limit "100Mi". `,
		"sidecar-over":   `Container side exceeded its local ephemeral storage limit "100Mi". `,
	}
	for uid, msg := range want {
		if pods.evicted[uid] != 1 || pods.msgs[uid] != msg {
			t.Errorf("%s: evicted %v, message %q; want %q", uid, pods.evicted[uid], pods.msgs[uid], msg)
		}
	}
	for _, uid := range []types.UID{"pod-under", "unlimited"} {
		if _, ok := pods.evicted[uid]; ok {
			t.Errorf("%s evicted within its limits", uid)
		}
	}
	if tr := m.Traces(); len(tr) != 1 || len(tr[0].Victims) != 3 {
		t.Errorf("traces %+v, want one with the three victims", tr)
	}
}

// A pod can make its emptyDir unmeasurable (a tree deeper than the walk
// goes): that used to skip the sizeLimit check; it now counts as over it.
func TestUnmeasurableEmptyDirCountsAsOverItsLimit(t *testing.T) {
	clock := clocktesting.NewFakeClock(time.Unix(1000, 0))
	limit := resource.MustParse("100Mi")
	p := pod("deep", corev1.PodQOSBestEffort, 0)
	p.Spec.Volumes = []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: &limit}}}}
	pods := &fakePods{pods: []*corev1.Pod{p}, emptyErr: map[string]error{"deep/scratch": errors.New("deeper than 1024 directories")},
		evicted: map[types.UID]int64{}, msgs: map[types.UID]string{}}
	m := NewManager(Options{Pressure: NewPressure(time.Minute, clock), Clock: clock}, &fakeSource{obs: Observations{}}, pods, pods)
	clock.Step(10 * time.Second)
	m.Synchronize(context.Background())
	want := `Usage of EmptyDir volume "scratch" cannot be measured (deeper than 1024 directories) and is counted as over the limit "100Mi". `
	if pods.evicted["deep"] != 1 || pods.msgs["deep"] != want {
		t.Errorf("evicted %v message %q", pods.evicted, pods.msgs["deep"])
	}
}

// drainingSource drains the victim's usage while the signals are read,
// as a dying process does between the reading and the pending check.
type drainingSource struct {
	*fakeSource
	pods *fakePods
}

func (d drainingSource) Observe(ctx context.Context) (Observations, error) {
	obs, err := d.fakeSource.Observe(ctx)
	d.pods.usage["hog"] = 0 // gone right after the reading
	return obs, err
}

func TestAVictimDrainingAfterTheReadingDoesNotTakeAnInnocent(t *testing.T) {
	mi := int64(1 << 20)
	clock := clocktesting.NewFakeClock(time.Unix(1000, 0))
	fp := &fakePods{
		pods:    []*corev1.Pod{pod("hog", corev1.PodQOSBestEffort, 0), pod("innocent", corev1.PodQOSGuaranteed, 0)},
		usage:   map[types.UID]int64{"hog": 700 * mi, "innocent": 10 * mi},
		evicted: map[types.UID]int64{}, msgs: map[types.UID]string{},
	}
	src := drainingSource{fakeSource: &fakeSource{obs: Observations{}}, pods: fp}
	ts, _ := ParseThresholds(Config{Hard: map[string]string{"allocatableMemory.available": "300Mi"}})
	m := NewManager(Options{Thresholds: ts, Pressure: NewPressure(time.Minute, clock), Clock: clock}, src, fp, fp)
	src.set(AllocatableMemoryAvailable, 280*mi, 1024*mi, clock.Now())
	fp.usage["hog"] = 700 * mi
	m.pending["hog"] = pendingEviction{pod: fp.pods[0], signal: AllocatableMemoryAvailable, usage: 700 * mi, since: clock.Now(), trace: 1}
	fp.evicted["hog"] = 1 // already evicted: not active
	clock.Step(100 * time.Millisecond)
	m.Synchronize(context.Background())
	if _, ok := fp.evicted["innocent"]; ok {
		t.Fatal("the innocent pod was evicted for memory its predecessor was already giving back")
	}
}

func TestPIDAndImageFsPressureEvictByTheirOwnMeasure(t *testing.T) {
	clock := clocktesting.NewFakeClock(time.Unix(1000, 0))
	src := &fakeSource{obs: Observations{}}
	pods := &fakePods{
		pods: []*corev1.Pod{pod("forker", corev1.PodQOSBestEffort, 10), pod("low", corev1.PodQOSGuaranteed, 0),
			pod("layers", corev1.PodQOSBurstable, 10), pod("critical", corev1.PodQOSBestEffort, 2000000000)},
		procs:   map[types.UID]int64{"forker": 900, "low": 3, "layers": 5, "critical": 2000},
		layers:  map[types.UID]int64{"forker": 1 << 20, "low": 1 << 20, "layers": 6 << 30, "critical": 9 << 30},
		evicted: map[types.UID]int64{}, msgs: map[types.UID]string{},
	}
	ts, _ := ParseThresholds(Config{Hard: map[string]string{"pid.available": "1000", "imagefs.available": "15%"}})
	m := NewManager(Options{Thresholds: ts, Pressure: NewPressure(time.Minute, clock), Clock: clock}, src, pods, pods)

	// 500 pids short: pods have no pid requests, so priority goes first
	// (low, 3 processes, is not enough), then the process count.
	src.set(PIDAvailable, 500, 100000, clock.Now())
	m.Synchronize(context.Background())
	if len(pods.evicted) != 2 || pods.evicted["low"] != 1 || pods.evicted["forker"] != 1 {
		t.Fatalf("pid pressure evicted %v, want low then forker", pods.evicted)
	}
	if c := m.opts.Pressure.Conditions(clock.Now())[2]; c.Type != corev1.NodePIDPressure || c.Status != corev1.ConditionTrue {
		t.Errorf("condition %+v", c)
	}
	if msg := pods.msgs["forker"]; msg != "The node was low on resource: pids. Threshold quantity: 1k, available: 500. Pod forker was using 900, request is 0, has larger consumption of pids. " {
		t.Errorf("message %q", msg)
	}
	if o := pods.orders["forker"]; !o.Disruption || o.Annotations["starved_resource"] != "pids" || o.Annotations["offending_containers"] != "" {
		t.Errorf("pids eviction order %+v", o)
	}

	// imagefs ranks by writable layers: the 6 GiB of "layers" covers the
	// 4 GiB missing; the critical pod with more is never a candidate.
	clock.Step(time.Second)
	src.set(PIDAvailable, 90000, 100000, clock.Now())
	src.set(ImageFsAvailable, 11<<30, 100<<30, clock.Now())
	m.Synchronize(context.Background())
	if len(pods.evicted) != 3 || pods.evicted["layers"] != 1 {
		t.Fatalf("imagefs pressure evicted %v, want layers", pods.evicted)
	}
}

// An evicted fork bomb goes on forking until it is killed, and its
// processes take a while to die: its eviction covers the deficit until
// they are gone, so no other pod goes along (upstream's
// PriorityPidEvictionOrdering: the innocent pod, with 2 processes, was
// evicted a second after the bombs while they died).
func TestPIDEvictionInFlightLastsUntilItsProcessesAreGone(t *testing.T) {
	clock := clocktesting.NewFakeClock(time.Unix(1000, 0))
	src := &fakeSource{obs: Observations{}}
	low, high, innocent := pod("low-bomb", corev1.PodQOSBestEffort, 0), pod("high-bomb", corev1.PodQOSBestEffort, 999999999), pod("innocent", corev1.PodQOSBestEffort, 999999999)
	pods := &fakePods{pods: []*corev1.Pod{low, high, innocent}, procs: map[types.UID]int64{"innocent": 2},
		evicted: map[types.UID]int64{}, msgs: map[types.UID]string{}}
	ts, _ := ParseThresholds(Config{Hard: map[string]string{"pid.available": "92018"}})
	m := NewManager(Options{Thresholds: ts, Pressure: NewPressure(time.Minute, clock), Clock: clock}, src, pods, pods)
	steps := []struct {
		what      string
		low, high int64
		evicted   []types.UID
	}{
		{"20 short: the low-priority bomb goes", 2000, 1000, []types.UID{"low-bomb"}},
		{"it dies while the other forks: covered", 1500, 1600, []types.UID{"low-bomb"}},
		{"it is gone, the other is short of 120: it goes", 0, 3100, []types.UID{"low-bomb", "high-bomb"}},
		{"it forks on through its grace: covered", 0, 3200, []types.UID{"low-bomb", "high-bomb"}},
		{"both gone", 0, 0, []types.UID{"low-bomb", "high-bomb"}},
	}
	for _, st := range steps {
		pods.procs["low-bomb"], pods.procs["high-bomb"] = st.low, st.high
		src.set(PIDAvailable, 100000-5000-st.low-st.high-2, 100000, clock.Now())
		m.Synchronize(context.Background())
		if len(pods.evicted) != len(st.evicted) {
			t.Fatalf("%s: evicted %v, want %v", st.what, pods.evicted, st.evicted)
		}
		for _, uid := range st.evicted {
			if pods.evicted[uid] != 1 {
				t.Fatalf("%s: evicted %v, want %v", st.what, pods.evicted, st.evicted)
			}
		}
		clock.Step(time.Second)
	}
}

// armingSource records when its notifications are armed, against the
// evictions.
type armingSource struct {
	*fakeSource
	pods    *fakePods
	armedAt []int // number of evictions when Arm ran
}

func (a *armingSource) Arm() error {
	a.pods.mu.Lock()
	defer a.pods.mu.Unlock()
	a.armedAt = append(a.armedAt, len(a.pods.evicted))
	return nil
}

// Registering a memcg threshold waits for an RCU grace period: the kernel
// notifications are armed after the kills are out, never before.
func TestNotificationsAreArmedAfterTheKills(t *testing.T) {
	mi := int64(1 << 20)
	clock := clocktesting.NewFakeClock(time.Unix(1000, 0))
	pods := &fakePods{pods: []*corev1.Pod{pod("hog", corev1.PodQOSBestEffort, 0)}, usage: map[types.UID]int64{"hog": 400 * mi},
		evicted: map[types.UID]int64{}, msgs: map[types.UID]string{}}
	src := &armingSource{fakeSource: &fakeSource{obs: Observations{}}, pods: pods}
	ts, _ := ParseThresholds(Config{Hard: map[string]string{"memory.available": "100Mi"}})
	m := NewManager(Options{Thresholds: ts, Clock: clock}, src, pods, pods)

	src.set(MemoryAvailable, 500*mi, 1000*mi, clock.Now())
	m.Synchronize(context.Background())
	src.set(MemoryAvailable, 60*mi, 1000*mi, clock.Now())
	m.Synchronize(context.Background())
	if len(src.armedAt) != 2 || src.armedAt[0] != 0 || src.armedAt[1] != 1 {
		t.Errorf("armed with %v evictions out, want once per synchronize, the second after the hog's eviction ([0 1])", src.armedAt)
	}
}

// TestHardMemoryVictimsAreKilledThroughTheirCgroups: a hard memory
// threshold's victims are evicted to be killed at once (KillNow) and the
// trace keeps what the kill did; soft memory and hard disk thresholds
// leave the kill to the pod workers, and a failed cgroup kill still counts
// as an eviction.
func TestHardMemoryVictimsAreKilledThroughTheirCgroups(t *testing.T) {
	mi := int64(1 << 20)
	for _, tc := range []struct {
		name     string
		cfg      Config
		signal   Signal
		killErr  error
		wantKill bool
	}{
		{"hard memory", Config{Hard: map[string]string{"memory.available": "100Mi"}}, MemoryAvailable, nil, true},
		{"hard memory, kill fails", Config{Hard: map[string]string{"memory.available": "100Mi"}}, MemoryAvailable, errors.New("no cgroup"), true},
		{"soft memory", Config{Soft: map[string]string{"memory.available": "100Mi"}, SoftGracePeriod: map[string]string{"memory.available": "0s"}}, MemoryAvailable, nil, false},
		{"hard disk", Config{Hard: map[string]string{"nodefs.available": "100Mi"}}, NodeFsAvailable, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := clocktesting.NewFakeClock(time.Unix(1000, 0))
			pods := &fakePods{pods: []*corev1.Pod{pod("hog", corev1.PodQOSBestEffort, 0)},
				usage: map[types.UID]int64{"hog": 400 * mi}, disk: map[types.UID]int64{"hog": 400 * mi},
				evicted: map[types.UID]int64{}, msgs: map[types.UID]string{}}
			src := &fakeSource{obs: Observations{}}
			ts, err := ParseThresholds(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			var killed []string
			pods.kill = func(uid types.UID) Kill {
				killed = append(killed, string(uid))
				return Kill{Done: true, Sigkilled: 2, Err: tc.killErr}
			}
			m := NewManager(Options{Thresholds: ts, Clock: clock}, src, pods, pods)
			src.set(tc.signal, 60*mi, 1000*mi, clock.Now())
			m.Synchronize(context.Background())

			traces := m.Traces()
			if len(traces) != 1 || len(traces[0].Victims) != 1 {
				t.Fatalf("traces %+v, want one decision with one victim", traces)
			}
			v := traces[0].Victims[0]
			if v.Error != "" {
				t.Errorf("victim error %q: the eviction itself succeeded", v.Error)
			}
			if !tc.wantKill {
				if len(killed) != 0 || !v.KilledAt.IsZero() {
					t.Errorf("killed %v (at %v), want the pod worker to stop it", killed, v.KilledAt)
				}
				return
			}
			if len(killed) != 1 || killed[0] != "hog" || v.KilledAt.IsZero() || v.Sigkilled != 2 {
				t.Errorf("killed %v, victim %+v; want hog killed through its cgroup, 2 processes", killed, v)
			}
			if (tc.killErr != nil) != (v.KillError != "") {
				t.Errorf("kill error %q, want one exactly when the kill failed (%v)", v.KillError, tc.killErr)
			}
		})
	}
}
