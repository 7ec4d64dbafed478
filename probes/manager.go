package probes

import (
	"container/heap"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"nodeagent/api"
	"nodeagent/internal/qos"
	"nodeagent/internal/safefile"
)

// Kind is a probe's type.
type Kind = api.ProbeKind

// The probe types.
const (
	Liveness  = api.Liveness
	Readiness = api.Readiness
	Startup   = api.Startup
)

// ContainerState is what probing needs to know of a container.
type ContainerState struct {
	Name      string
	ID        string // the runtime's ID; "" before the first start
	Running   bool
	StartedAt time.Time
}

// Options configure a Manager.
type Options struct {
	Clock    clock.WithTicker
	Handlers *Handlers
	// StateDir keeps each pod's readiness and startup results across agent
	// restarts, so a restart does not flip ready pods to NotReady.
	StateDir string
	// Changed is called (without locks held) when a published result
	// changes: readiness or startup to update status, liveness or startup
	// failures to have the pod worker kill the container.
	Changed func(uid types.UID, kind Kind)
	// Event records an event about a pod's container.
	Event func(pod *corev1.Pod, container, eventType, reason, message string)
	Log   *slog.Logger
	// Jitter picks the first delay of probes of containers that were
	// already running when the agent started (default: uniform in [0, d)).
	Jitter func(d time.Duration) time.Duration
}

// Manager runs every probe of every pod on one scheduler: a single
// goroutine keeps a queue ordered by due time and starts each run in a
// goroutine of its own that ends with the run, so a hanging target costs
// one goroutine for at most its timeout and never delays other probes.
type Manager struct {
	opts    Options
	run     func(ctx context.Context, p *corev1.Probe, t Target) outcome
	born    time.Time
	Metrics *Metrics

	mu    sync.Mutex
	pods  map[types.UID]*podProbes
	queue queue
	kick  chan struct{}
}

type podProbes struct {
	uid         types.UID
	pod         *corev1.Pod
	podIP       string
	terminating bool
	probes      []*probe
	saved       map[string]savedResult // by container ID, from the state file
}

// savedResult is what survives an agent restart for one container.
type savedResult struct {
	Ready   bool `json:"ready"`
	Started bool `json:"started"`
}

// probe is one (container, kind) state machine.
type probe struct {
	pod       *podProbes
	container *corev1.Container
	kind      Kind
	spec      *corev1.Probe

	containerID string
	running     bool
	startedAt   time.Time

	result    Result // published
	lastRun   Result
	runLength int  // consecutive runs with lastRun
	onHold    bool // liveness failed or startup decided: wait for a new container
	inflight  bool
	removed   bool
	missed    int

	registered time.Time // when the pod was added: the phase of the probe's ticks
	due        time.Time
	heapIndex  int
	last       *RunReport
}

// NewManager returns a manager; Run starts its scheduler.
func NewManager(opts Options) *Manager {
	if opts.Jitter == nil {
		opts.Jitter = func(d time.Duration) time.Duration {
			if d <= 0 {
				return 0
			}
			return rand.N(d)
		}
	}
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	if opts.Changed == nil {
		opts.Changed = func(types.UID, Kind) {}
	}
	if opts.Event == nil {
		opts.Event = func(*corev1.Pod, string, string, string, string) {}
	}
	m := &Manager{
		opts: opts, born: opts.Clock.Now(), Metrics: NewMetrics(),
		pods: map[types.UID]*podProbes{}, kick: make(chan struct{}, 1),
	}
	if opts.Handlers != nil {
		m.run = opts.Handlers.probe
	}
	return m
}

// Run schedules probes until ctx ends.
func (m *Manager) Run(ctx context.Context) {
	for {
		m.mu.Lock()
		now := m.opts.Clock.Now()
		wait := time.Hour
		for len(m.queue) > 0 {
			p := m.queue[0]
			if p.due.After(now) {
				wait = p.due.Sub(now)
				break
			}
			m.dispatchLocked(ctx, p, now)
		}
		m.mu.Unlock()
		timer := m.opts.Clock.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-m.kick:
		case <-timer.C():
		}
		timer.Stop()
	}
}

func (m *Manager) wake() {
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

// AddPod registers the probes of a pod's containers (and sidecars); a pod
// already known is left alone.
func (m *Manager) AddPod(pod *corev1.Pod) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.pods[pod.UID]; ok {
		return
	}
	pp := &podProbes{uid: pod.UID, pod: pod, saved: m.loadSaved(pod.UID)}
	add := func(c *corev1.Container) {
		for _, k := range []struct {
			kind Kind
			spec *corev1.Probe
		}{{Startup, c.StartupProbe}, {Liveness, c.LivenessProbe}, {Readiness, c.ReadinessProbe}} {
			if k.spec != nil {
				pp.probes = append(pp.probes, &probe{pod: pp, container: c, kind: k.kind, spec: k.spec, heapIndex: -1, registered: m.opts.Clock.Now()})
			}
		}
	}
	for i := range pod.Spec.InitContainers {
		if c := &pod.Spec.InitContainers[i]; qos.IsSidecar(c) {
			add(c)
		}
	}
	for i := range pod.Spec.Containers {
		add(&pod.Spec.Containers[i])
	}
	if len(pp.probes) > 0 {
		m.pods[pod.UID] = pp
	}
}

// RemovePod stops probing a pod. forget also drops its saved results: the
// pod is gone, not merely unwatched by an agent that is stopping.
func (m *Manager) RemovePod(uid types.UID, forget bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if pp, ok := m.pods[uid]; ok {
		for _, p := range pp.probes {
			p.removed = true
			if p.heapIndex >= 0 {
				heap.Remove(&m.queue, p.heapIndex)
			}
		}
		delete(m.pods, uid)
	}
	if forget && m.opts.StateDir != "" {
		os.Remove(m.statePath(uid))
	}
}

// UpdatePod tells the manager the pod's containers as they are now. A new
// container ID starts its probes over from their initial results.
func (m *Manager) UpdatePod(uid types.UID, podIP string, terminating bool, containers []ContainerState) {
	m.mu.Lock()
	pp, ok := m.pods[uid]
	if !ok {
		m.mu.Unlock()
		return
	}
	pp.podIP = podIP
	pp.terminating = terminating
	now := m.opts.Clock.Now()
	kicked, save := false, false
	for _, p := range pp.probes {
		var st ContainerState
		for _, c := range containers {
			if c.Name == p.container.Name {
				st = c
			}
		}
		if st.ID != p.containerID {
			m.resetLocked(p, st, now)
			save = true
		}
		wasRunning := p.running
		p.running = st.Running
		if p.running && !wasRunning && p.heapIndex < 0 {
			p.due = m.firstDue(p, now)
			heap.Push(&m.queue, p)
			kicked = true
		}
	}
	if save {
		m.saveLocked(pp)
	}
	m.mu.Unlock()
	if kicked {
		m.wake()
	}
}

// resetLocked gives p a new container: initial results (readiness
// Failure, liveness Success, startup Unknown) unless the container was
// already probed before an agent restart.
func (m *Manager) resetLocked(p *probe, st ContainerState, now time.Time) {
	p.containerID, p.startedAt = st.ID, st.StartedAt
	p.runLength, p.lastRun, p.onHold, p.missed, p.last = 0, Unknown, false, 0, nil
	switch p.kind {
	case Readiness:
		p.result = Failure
	case Liveness:
		p.result = Success
	case Startup:
		p.result = Unknown
	}
	if saved, ok := p.pod.saved[st.ID]; ok {
		switch {
		case p.kind == Readiness && saved.Ready:
			p.result = Success
		case p.kind == Startup && saved.Started:
			p.result, p.onHold = Success, true
		}
	}
	if p.heapIndex >= 0 {
		heap.Remove(&m.queue, p.heapIndex)
	}
	p.running = false // UpdatePod schedules it when it runs
}

// firstDue is when a new container's probe first runs. A readiness probe
// runs as soon as its initial delay is over, since a failed readiness run
// costs nothing. Liveness and startup probes, which kill, run on ticks of
// their period counted from when the pod was added, at the first tick after
// the initial delay, as the kubelet's per-probe ticker does; a server
// that takes a moment to listen is not killed for it. For a container that
// was running before this agent started, the first run falls at a random
// point of the first period, so a restarted agent does not probe
// everything at once.
func (m *Manager) firstDue(p *probe, now time.Time) time.Time {
	period := time.Duration(p.spec.PeriodSeconds) * time.Second
	if !p.startedAt.IsZero() && p.startedAt.Before(m.born) {
		return now.Add(m.opts.Jitter(period))
	}
	due := p.startedAt.Add(time.Duration(p.spec.InitialDelaySeconds) * time.Second)
	if due.Before(now) {
		due = now
	}
	if p.kind == Readiness || period <= 0 {
		return due
	}
	ticks := (due.Sub(p.registered) + period - 1) / period
	return p.registered.Add(max(ticks, 1) * period)
}

// dispatchLocked starts p's run if it should run now and re-queues it for
// its next period. p is at the head of the queue.
func (m *Manager) dispatchLocked(ctx context.Context, p *probe, now time.Time) {
	heap.Pop(&m.queue)
	if !p.running {
		return // UpdatePod re-queues it when a container runs again
	}
	period := time.Duration(p.spec.PeriodSeconds) * time.Second
	if p.inflight {
		p.missed++
		m.Metrics.addMissed(p.kind)
	} else if m.shouldRunLocked(p) {
		p.inflight = true
		t := Target{PodIP: p.pod.podIP, ContainerID: p.containerID, Container: p.container}
		go m.execute(ctx, p, t)
	}
	p.due = p.due.Add(period)
	if !p.due.After(now) {
		p.due = now.Add(period)
	}
	heap.Push(&m.queue, p)
}

// shouldRunLocked is the kubelet's doProbe gating.
func (m *Manager) shouldRunLocked(p *probe) bool {
	if p.onHold || p.containerID == "" {
		return false
	}
	if p.pod.terminating && p.kind != Readiness {
		return false // a terminating pod is never restarted by a probe
	}
	if p.kind != Startup && !m.startedLocked(p.pod, p.container.Name) {
		return false // until the startup probe succeeds only it runs
	}
	if p.pod.podIP == "" && needsIP(p.spec) {
		return false // the sandbox has no IP yet (or lost it)
	}
	return true
}

func needsIP(p *corev1.Probe) bool {
	return (p.HTTPGet != nil && p.HTTPGet.Host == "") || (p.TCPSocket != nil && p.TCPSocket.Host == "") || p.GRPC != nil
}

func (m *Manager) startedLocked(pp *podProbes, container string) bool {
	for _, p := range pp.probes {
		if p.kind == Startup && p.container.Name == container {
			return p.result == Success
		}
	}
	return true
}

// execute runs one probe and applies its result.
func (m *Manager) execute(ctx context.Context, p *probe, t Target) {
	start := m.opts.Clock.Now()
	out := m.run(ctx, p.spec, t)
	took := m.opts.Clock.Since(start)
	if ctx.Err() != nil {
		return
	}
	m.Metrics.observe(p.kind, out.result, took)

	m.mu.Lock()
	p.inflight = false
	if p.removed || p.containerID != t.ContainerID {
		m.mu.Unlock()
		return // the container changed under the run: its result is moot
	}
	pod, name := p.pod.pod, p.container.Name
	p.last = &RunReport{Time: start, Result: out.result.String(), Message: truncate(out.message, 512), Duration: took.Seconds()}
	result := out.result
	if result == Unknown {
		result = Failure // the kubelet's mapping of Unknown
	}
	if result == p.lastRun {
		p.runLength++
	} else {
		p.lastRun, p.runLength = result, 1
	}
	threshold := p.spec.SuccessThreshold
	if result == Failure {
		threshold = p.spec.FailureThreshold
	}
	changed := false
	var siblings bool
	if int32(p.runLength) >= threshold {
		changed = p.result != result
		p.result = result
		if (p.kind == Liveness && result == Failure) || p.kind == Startup {
			p.onHold = true
		}
		if p.kind == Startup && result == Success {
			siblings = true
			m.dueNowLocked(p.pod, name)
		}
		if changed && p.kind != Liveness {
			m.saveLocked(p.pod)
		}
	}
	m.mu.Unlock()

	kind := strings.ToLower(string(p.kind))
	switch {
	case out.result == Unknown:
		m.opts.Event(pod, name, corev1.EventTypeWarning, "Unhealthy", fmt.Sprintf("%s probe errored and resulted in %s state: %s", p.kind, Failure, out.message))
	case out.result == Failure:
		m.opts.Event(pod, name, corev1.EventTypeWarning, "Unhealthy", fmt.Sprintf("%s probe failed: %s", p.kind, out.message))
	case out.warning:
		m.opts.Event(pod, name, corev1.EventTypeWarning, "ProbeWarning", fmt.Sprintf("%s probe warning: %s", p.kind, out.message))
	}
	if changed {
		m.opts.Log.Info("probe result changed", "pod", pod.Namespace+"/"+pod.Name, "container", name, "probe", kind, "result", result.String())
		m.opts.Changed(pod.UID, p.kind)
	}
	if siblings {
		m.wake()
	}
}

// dueNowLocked moves a container's liveness and readiness probes to now,
// once its startup probe succeeded.
func (m *Manager) dueNowLocked(pp *podProbes, container string) {
	now := m.opts.Clock.Now()
	for _, q := range pp.probes {
		if q.container.Name == container && q.kind != Startup && q.heapIndex >= 0 {
			q.due = now
			heap.Fix(&m.queue, q.heapIndex)
		}
	}
}

// Ready is the readiness result for a container (true when it has no
// readiness probe). A container ID not seen yet gets its saved result, or
// the initial Failure.
func (m *Manager) Ready(uid types.UID, container, id string) bool {
	return m.result(uid, container, id, Readiness, func(s savedResult) bool { return s.Ready }, true)
}

// Started is whether a container's startup probe succeeded (true when it
// has none).
func (m *Manager) Started(uid types.UID, container, id string) bool {
	return m.result(uid, container, id, Startup, func(s savedResult) bool { return s.Started }, true)
}

func (m *Manager) result(uid types.UID, container, id string, kind Kind, saved func(savedResult) bool, none bool) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	pp, ok := m.pods[uid]
	if !ok {
		return none
	}
	for _, p := range pp.probes {
		if p.kind != kind || p.container.Name != container {
			continue
		}
		if p.containerID == id {
			return p.result == Success
		}
		if s, ok := pp.saved[id]; ok {
			return saved(s)
		}
		return false
	}
	return none
}

// Kill says whether a liveness or startup failure wants the container
// killed, and with which grace period: the probe's
// terminationGracePeriodSeconds when set, else nil (the pod's).
func (m *Manager) Kill(uid types.UID, container, id string) (kind Kind, grace *int64, kill bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	pp, ok := m.pods[uid]
	if !ok || pp.terminating {
		return "", nil, false
	}
	for _, p := range pp.probes {
		if p.container.Name == container && p.containerID == id && p.kind != Readiness && p.result == Failure {
			return p.kind, p.spec.TerminationGracePeriodSeconds, true
		}
	}
	return "", nil, false
}

// RunReport is one run of a probe.
type RunReport = api.ProbeRun

// Report is a probe's state, for the local API.
type Report = api.ProbeReport

// Reports lists a pod's probes, by container and type.
func (m *Manager) Reports(uid types.UID) []Report {
	m.mu.Lock()
	defer m.mu.Unlock()
	pp, ok := m.pods[uid]
	if !ok {
		return nil
	}
	out := make([]Report, 0, len(pp.probes))
	for _, p := range pp.probes {
		r := Report{Container: p.container.Name, Type: p.kind, ContainerID: p.containerID, Result: p.result.String(),
			Consecutive: p.runLength, OnHold: p.onHold, Missed: p.missed}
		if p.last != nil {
			last := *p.last
			r.Last = &last
		}
		out = append(out, r)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Container < out[j].Container })
	return out
}

// maxStateFile bounds a pod's saved probe results (a few bytes a container).
const maxStateFile = 1 << 20

func (m *Manager) statePath(uid types.UID) string {
	return filepath.Join(m.opts.StateDir, string(uid)+".json")
}

func (m *Manager) loadSaved(uid types.UID) map[string]savedResult {
	saved := map[string]savedResult{}
	if m.opts.StateDir == "" {
		return saved
	}
	b, err := safefile.Read(m.statePath(uid), maxStateFile)
	if errors.Is(err, os.ErrNotExist) {
		return saved
	}
	if err == nil {
		err = json.Unmarshal(b, &saved)
	}
	if err != nil {
		// Torn or foreign: start from the initial results, and remove it so
		// the next save starts clean instead of this warning repeating.
		m.opts.Log.Warn("saved probe results unreadable; starting from initial results", "file", m.statePath(uid), "err", err)
		os.Remove(m.statePath(uid))
		return map[string]savedResult{}
	}
	return saved
}

// saveLocked writes the pod's current readiness and startup results,
// atomically (write and rename).
func (m *Manager) saveLocked(pp *podProbes) {
	if m.opts.StateDir == "" {
		return
	}
	state := map[string]savedResult{}
	for _, p := range pp.probes {
		if p.containerID == "" {
			continue
		}
		s := state[p.containerID]
		switch p.kind {
		case Readiness:
			s.Ready = p.result == Success
		case Startup:
			s.Started = p.result == Success
		default:
			continue
		}
		state[p.containerID] = s
	}
	pp.saved = state
	b, _ := json.Marshal(state)
	if err := os.MkdirAll(m.opts.StateDir, 0o700); err != nil {
		m.opts.Log.Warn("save probe results", "err", err)
		return
	}
	if err := safefile.Write(m.statePath(pp.uid), b, 0o600); err != nil {
		m.opts.Log.Warn("save probe results", "err", err)
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// queue is a min-heap of probes by due time.
type queue []*probe

func (q queue) Len() int           { return len(q) }
func (q queue) Less(i, j int) bool { return q[i].due.Before(q[j].due) }
func (q queue) Swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].heapIndex, q[j].heapIndex = i, j
}
func (q *queue) Push(x any) {
	p := x.(*probe)
	p.heapIndex = len(*q)
	*q = append(*q, p)
}
func (q *queue) Pop() any {
	old := *q
	p := old[len(old)-1]
	old[len(old)-1] = nil
	p.heapIndex = -1
	*q = old[:len(old)-1]
	return p
}
