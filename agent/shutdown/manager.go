// Package shutdown is graceful node shutdown, as the kubelet's
// nodeshutdown manager: a delay inhibitor lock from systemd-logind holds
// the machine's shutdown while the pods stop, lowest priority group first,
// each within its share of the grace period; the node turns NotReady and
// refuses new pods meanwhile. A cancelled shutdown takes the lock again.
package shutdown

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"nodeagent/internal/sat"
)

// The kubelet's words.
const (
	// Reason and Message are a stopped pod's status (and its
	// DisruptionTarget condition's message).
	Reason  = "Terminated"
	Message = "Pod was terminated in response to imminent node shutdown."
	// RejectReason and RejectMessage refuse a pod while the node shuts
	// down.
	RejectReason  = "NodeShutdown"
	RejectMessage = "Pod was rejected as the node is shutting down."
	// NotReadyMessage is the node's Ready condition meanwhile.
	NotReadyMessage = "node is shutting down"
	// StateFile, in the root directory, records the last shutdown's start
	// and end.
	StateFile = "graceful_node_shutdown_state"
)

// systemCriticalPriority is where shutdownGracePeriodCriticalPods starts.
const systemCriticalPriority = 2000000000

// Group is one shutdownGracePeriodByPodPriority entry: pods of at least
// Priority (and below the next group's) get GracePeriod to stop.
type Group struct {
	Priority    int32
	GracePeriod time.Duration
}

// Groups are the kubelet's priority groups: shutdownGracePeriodByPodPriority
// as given, else shutdownGracePeriod less shutdownGracePeriodCriticalPods
// for the pods below system-critical priority and the critical share for
// the rest; nil (shutdown handling off) when the grace period is 0.
func Groups(byPriority []Group, grace, critical time.Duration) []Group {
	if len(byPriority) > 0 {
		out := slices.Clone(byPriority)
		sort.SliceStable(out, func(i, j int) bool { return out[i].Priority < out[j].Priority })
		return out
	}
	if grace <= 0 || grace < critical {
		return nil
	}
	return []Group{{Priority: 0, GracePeriod: grace - critical}, {Priority: systemCriticalPriority, GracePeriod: critical}}
}

// total is how long the inhibitor must be allowed to hold the shutdown.
func total(groups []Group) time.Duration {
	var d time.Duration
	for _, g := range groups {
		d += g.GracePeriod
	}
	return d
}

// Logind is what the manager needs of systemd-logind, over D-Bus.
type Logind interface {
	// InhibitDelayMax is logind's InhibitDelayMaxUSec.
	InhibitDelayMax() (time.Duration, error)
	// RaiseInhibitDelay makes logind allow at least d (a drop-in and a
	// reload).
	RaiseInhibitDelay(d time.Duration) error
	// Inhibit takes a delay lock on shutdown.
	Inhibit() (release func() error, err error)
	// PrepareForShutdown delivers logind's signal: true when the machine
	// is about to shut down, false when that was cancelled. The channel
	// closes when the connection is lost.
	PrepareForShutdown(ctx context.Context) (<-chan bool, error)
	Close() error
}

// Pods is what the manager needs of the pod manager.
type Pods interface {
	// Active lists the pods not stopping or finished.
	Active() []*corev1.Pod
	// Shutdown stops a pod for the node's shutdown with grace and returns
	// once nothing of it runs or ctx ends.
	Shutdown(ctx context.Context, pod *corev1.Pod, grace time.Duration)
}

// Options configure a Manager.
type Options struct {
	Groups  []Group
	Connect func() (Logind, error)
	Pods    Pods
	// StatePath is where the last shutdown's times are kept (StateFile).
	StatePath string
	// Changed, if set, is told when the node starts or stops shutting
	// down.
	Changed func(shuttingDown bool)
	// Event, if set, records a node event.
	Event func(eventType, reason, message string)
	Clock clock.WithTicker
	Log   *slog.Logger
}

// Manager handles the node's shutdown.
type Manager struct {
	opts Options

	mu           sync.Mutex
	shuttingDown bool
	release      func() error // the inhibitor lock held, nil when none
	lastStart    time.Time
	lastEnd      time.Time
}

// NewManager returns a manager, nil when no group has a grace period (the
// kubelet's stub: nothing is handled).
func NewManager(opts Options) *Manager {
	if len(opts.Groups) == 0 {
		return nil
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	m := &Manager{opts: opts}
	if st, err := loadState(opts.StatePath); err == nil {
		m.lastStart, m.lastEnd = st.StartTime, st.EndTime
	}
	return m
}

// ShuttingDown reports whether the node is shutting down.
func (m *Manager) ShuttingDown() bool {
	if m == nil {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.shuttingDown
}

// Times are the last shutdown's start and end (zero: none recorded).
func (m *Manager) Times() (start, end time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.lastStart, m.lastEnd
}

// reconnectPeriod is how long the manager waits to watch again after the
// bus connection is lost.
const reconnectPeriod = time.Second

// Run starts watching and handles shutdowns until ctx ends. The first
// start's error is returned (the kubelet logs it and goes on without);
// later ones are retried every second.
func (m *Manager) Run(ctx context.Context, started func(error)) {
	first := true
	for ctx.Err() == nil {
		lg, events, err := m.start(ctx)
		if first {
			started(err)
			first = false
			if err != nil {
				return
			}
		}
		if err == nil {
			m.loop(ctx, lg, events)
			m.dropLock()
			lg.Close()
		} else {
			m.opts.Log.Warn("unable to watch the node for shutdown events; retrying", "err", err)
		}
		select {
		case <-ctx.Done():
		case <-m.opts.Clock.After(reconnectPeriod):
			m.opts.Log.Info("restarting watch for node shutdown events")
		}
	}
}

// start connects, makes logind allow the groups' total delay, takes the
// lock and subscribes to PrepareForShutdown.
func (m *Manager) start(ctx context.Context) (Logind, <-chan bool, error) {
	lg, err := m.opts.Connect()
	if err != nil {
		return nil, nil, fmt.Errorf("connect to the system bus: %w", err)
	}
	fail := func(err error) (Logind, <-chan bool, error) {
		m.dropLock()
		lg.Close()
		return nil, nil, err
	}
	want := total(m.opts.Groups)
	have, err := lg.InhibitDelayMax()
	if err != nil {
		return fail(err)
	}
	if want > have {
		if err := lg.RaiseInhibitDelay(want); err != nil {
			return fail(fmt.Errorf("unable to override inhibit delay by shutdown manager: %w", err))
		}
		wait := 100 * time.Millisecond
		for i := 0; i < 5 && have < want; i++ {
			m.opts.Clock.Sleep(wait)
			wait *= 2
			if have, err = lg.InhibitDelayMax(); err != nil {
				return fail(err)
			}
		}
		if have < want {
			return fail(fmt.Errorf("node shutdown manager was timed out after 5 attempts waiting for logind InhibitDelayMaxSec to update to %v (ShutdownGracePeriod), current value is %v", want, have))
		}
	}
	if err := m.takeLock(lg); err != nil {
		return fail(err)
	}
	events, err := lg.PrepareForShutdown(ctx)
	if err != nil {
		return fail(fmt.Errorf("failed to monitor shutdown: %w", err))
	}
	m.opts.Log.Info("watching for node shutdown", "inhibit_delay", have, "groups", len(m.opts.Groups))
	return lg, events, nil
}

// takeLock takes a new lock, then lets the old one go (if any).
func (m *Manager) takeLock(lg Logind) error {
	release, err := lg.Inhibit()
	if err != nil {
		return fmt.Errorf("failed creating systemd inhibitor: %w", err)
	}
	m.mu.Lock()
	old := m.release
	m.release = release
	m.mu.Unlock()
	if old != nil {
		old()
	}
	return nil
}

// dropLock lets the lock go, once.
func (m *Manager) dropLock() {
	m.mu.Lock()
	release := m.release
	m.release = nil
	m.mu.Unlock()
	if release != nil {
		if err := release(); err != nil {
			m.opts.Log.Warn("release the shutdown inhibitor lock", "err", err)
		}
	}
}

// loop handles logind's signals, one at a time (a cancel waits for the
// pods being stopped), until the connection or ctx ends.
func (m *Manager) loop(ctx context.Context, lg Logind, events <-chan bool) {
	for {
		select {
		case <-ctx.Done():
			return
		case shutting, ok := <-events:
			if !ok {
				return
			}
			m.handle(ctx, lg, shutting)
		}
	}
}

func (m *Manager) handle(ctx context.Context, lg Logind, shutting bool) {
	msg := "Shutdown manager detected shutdown cancellation"
	if shutting {
		msg = "Shutdown manager detected shutdown event"
	}
	m.opts.Log.Info(msg)
	if m.opts.Event != nil {
		m.opts.Event(corev1.EventTypeNormal, "Shutdown", msg)
	}
	m.mu.Lock()
	m.shuttingDown = shutting
	m.mu.Unlock()
	if m.opts.Changed != nil {
		m.opts.Changed(shutting)
	}
	if !shutting {
		if err := m.takeLock(lg); err != nil {
			m.opts.Log.Warn("take the shutdown inhibitor lock again", "err", err)
		}
		return
	}
	m.stopPods(ctx)
	// The machine goes on shutting down once the lock is gone.
	m.dropLock()
}

// stopPods stops the active pods group by group, lowest priority first,
// each group within its grace period.
func (m *Manager) stopPods(ctx context.Context) {
	start := m.opts.Clock.Now()
	m.record(start, time.Time{})
	defer func() { m.record(start, m.opts.Clock.Now()) }()
	for i, pods := range groupByPriority(m.opts.Groups, m.opts.Pods.Active()) {
		if len(pods) == 0 || ctx.Err() != nil {
			continue
		}
		g := m.opts.Groups[i]
		m.opts.Log.Info("stopping pods for the node's shutdown", "priority", g.Priority, "grace_period", g.GracePeriod, "pods", len(pods))
		gctx, cancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		for _, p := range pods {
			grace := g.GracePeriod
			if t := p.Spec.TerminationGracePeriodSeconds; t != nil && sat.Seconds(*t) <= grace {
				grace = sat.Seconds(*t)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				m.opts.Pods.Shutdown(gctx, p, grace)
			}()
		}
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-m.opts.Clock.After(g.GracePeriod):
			m.opts.Log.Warn("shutdown manager pod killing time out", "priority", g.Priority, "grace_period", g.GracePeriod)
		case <-ctx.Done():
		}
		cancel()
	}
}

// groupByPriority puts each pod in the group of the largest priority at or
// below its own (the lowest group for pods below all).
func groupByPriority(groups []Group, pods []*corev1.Pod) [][]*corev1.Pod {
	out := make([][]*corev1.Pod, len(groups))
	for _, p := range pods {
		prio := int32(0)
		if p.Spec.Priority != nil {
			prio = *p.Spec.Priority
		}
		i := sort.Search(len(groups), func(i int) bool { return groups[i].Priority > prio }) - 1
		if i < 0 {
			i = 0
		}
		out[i] = append(out[i], p)
	}
	return out
}

func (m *Manager) record(start, end time.Time) {
	m.mu.Lock()
	m.lastStart, m.lastEnd = start, end
	m.mu.Unlock()
	if err := saveState(m.opts.StatePath, state{StartTime: start, EndTime: end}); err != nil {
		m.opts.Log.Warn("failed to store graceful shutdown state", "path", m.opts.StatePath, "err", err)
	}
}

// Metrics are the kubelet's graceful shutdown gauges: the last shutdown's
// start and end, in Unix seconds (0: none).
func (m *Manager) Metrics() []prometheus.Collector {
	unix := func(t time.Time) float64 {
		if t.IsZero() {
			return 0
		}
		return float64(t.UnixNano()) / 1e9
	}
	return []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "kubelet_graceful_shutdown_start_time_seconds",
			Help: "Last graceful shutdown start time since unix epoch in seconds"}, func() float64 { s, _ := m.Times(); return unix(s) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "kubelet_graceful_shutdown_end_time_seconds",
			Help: "Last graceful shutdown end time since unix epoch in seconds"}, func() float64 { _, e := m.Times(); return unix(e) }),
	}
}
