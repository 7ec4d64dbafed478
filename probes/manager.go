package probes

import (
	"container/heap"
	"context"
	"log/slog"
	"math/rand/v2"
	"os"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"nodeagent/api"
	"nodeagent/internal/qos"
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
	// Event records an event about a pod's container: message, then what
	// the container said (output, "" for none), which only the API
	// server's copy of the event may show.
	Event func(pod *corev1.Pod, container, eventType, reason, message, output string)
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
		opts.Event = func(*corev1.Pod, string, string, string, string, string) {}
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
		m.Metrics.forgetPod(pp.pod)
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

func (m *Manager) startedLocked(pp *podProbes, container string) bool {
	for _, p := range pp.probes {
		if p.kind == Startup && p.container.Name == container {
			return p.result == Success
		}
	}
	return true
}
