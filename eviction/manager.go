package eviction

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"nodeagent/internal/qos"
)

// Pods is what eviction needs from the pod manager.
type Pods interface {
	// Active lists the admitted pods that still run (not terminal, not
	// already being evicted).
	Active() []*corev1.Pod
	// Evict stops a pod with grace seconds and leaves it Failed with
	// reason Evicted and message.
	Evict(uid types.UID, grace int64, message string) error
}

// PodUsage reads a pod's use of a starved resource.
type PodUsage interface {
	// Memory is the pod's working set in bytes.
	Memory(pod *corev1.Pod) (int64, bool)
}

// Options configure a Manager.
type Options struct {
	Thresholds []Threshold
	// MaxPodGracePeriod caps a pod's grace period on soft evictions
	// (evictionMaxPodGracePeriod); 0 leaves the pod's own.
	MaxPodGracePeriod int64
	// TransitionPeriod keeps a pressure condition on this long after the
	// last observation that met a threshold (evictionPressureTransitionPeriod).
	TransitionPeriod time.Duration
	// Period is the safety-net poll (default 1 s).
	Period  time.Duration
	Ranking Ranking
	Clock   clock.WithTicker
	Log     *slog.Logger
	// Event records a node event.
	Event func(eventType, reason, message string)
}

// Manager watches the signals and evicts pods when thresholds are met. The
// deciding path holds no stats collection: observations come in, victims
// are picked from fresh pod usage, kills go out in parallel.
type Manager struct {
	opts  Options
	node  NodeSource
	pods  Pods
	usage PodUsage
	kick  chan struct{}

	mu            sync.Mutex
	obs           Observations
	obsErr        error
	firstObserved map[string]time.Time // threshold key -> first observation meeting it
	lastObserved  map[corev1.NodeConditionType]time.Time
	reclaiming    map[string]bool // thresholds met, kept until minimum reclaim is satisfied
	pending       map[types.UID]pendingEviction
	transitions   map[corev1.NodeConditionType]transition
	traces        []Trace
	nextID        int
}

type transition struct {
	status bool
	since  time.Time
}

type pendingEviction struct {
	usage int64
	since time.Time
	trace int
}

// pendingTimeout bounds how long an evicted pod's usage is assumed to be
// on its way out.
const pendingTimeout = 30 * time.Second

// maxTraces is how many decisions are kept for `nodectl get evictions`.
const maxTraces = 100

// NewManager returns a manager; Run starts it.
func NewManager(opts Options, node NodeSource, pods Pods, usage PodUsage) *Manager {
	if opts.Period <= 0 {
		opts.Period = time.Second
	}
	if opts.Ranking == "" {
		opts.Ranking = RankKubelet
	}
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	if opts.Event == nil {
		opts.Event = func(string, string, string) {}
	}
	return &Manager{
		opts: opts, node: node, pods: pods, usage: usage, kick: make(chan struct{}, 1),
		firstObserved: map[string]time.Time{}, lastObserved: map[corev1.NodeConditionType]time.Time{},
		reclaiming: map[string]bool{}, pending: map[types.UID]pendingEviction{},
		transitions: map[corev1.NodeConditionType]transition{},
	}
}

// Notify asks for a synchronization now (a kernel event crossed a line).
func (m *Manager) Notify() {
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

// Run synchronizes every period and on every Notify until ctx ends.
func (m *Manager) Run(ctx context.Context) {
	ticker := m.opts.Clock.NewTicker(m.opts.Period)
	defer ticker.Stop()
	for {
		m.Synchronize(ctx)
		select {
		case <-ctx.Done():
			return
		case <-ticker.C():
		case <-m.kick:
		}
	}
}

func key(t Threshold) string { return fmt.Sprintf("%s/%v", t.Signal, t.Hard) }

// Synchronize observes, updates conditions and evicts if a threshold is
// met. It is the kubelet's synchronize, without its one-pod-per-cycle limit.
func (m *Manager) Synchronize(ctx context.Context) {
	woke := m.opts.Clock.Now()
	obs, err := m.node.Observe(ctx)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.obs, m.obsErr = obs, err
	if err != nil {
		m.opts.Log.Debug("some eviction signals are unavailable; they are not acted on", "err", err)
	}
	now := m.opts.Clock.Now()
	m.expirePendingLocked(now)

	var met []Threshold
	for _, t := range m.opts.Thresholds {
		o, ok := obs[t.Signal]
		if !ok {
			continue // never act on missing data
		}
		line := t.Value.Of(o.Capacity)
		if m.reclaiming[key(t)] && t.MinReclaim != nil {
			line += t.MinReclaim.Of(o.Capacity)
		}
		if o.Available < line {
			met = append(met, t)
			if _, seen := m.firstObserved[key(t)]; !seen {
				m.firstObserved[key(t)] = o.Time
			}
			m.lastObserved[t.Signal.Condition()] = now
		} else {
			delete(m.firstObserved, key(t))
			delete(m.reclaiming, key(t))
		}
	}
	// Soft thresholds count once they held for their grace period.
	var acting []Threshold
	for _, t := range met {
		if t.Hard || now.Sub(m.firstObserved[key(t)]) >= t.GracePeriod {
			acting = append(acting, t)
		}
	}
	if len(acting) == 0 {
		return
	}
	// Memory first, as the kubelet orders them.
	sort.SliceStable(acting, func(i, j int) bool {
		_, _, a, _ := signalInfo(acting[i].Signal)
		_, _, b, _ := signalInfo(acting[j].Signal)
		return a < b
	})
	m.evictLocked(acting[0], obs[acting[0].Signal], woke)
}

// evictLocked picks the smallest set of pods, in rank order, whose usage
// covers the deficit (plus the minimum reclaim) that is not already on its
// way out, and evicts them in parallel.
func (m *Manager) evictLocked(t Threshold, o Observation, woke time.Time) {
	m.reclaiming[key(t)] = true
	line := t.Value.Of(o.Capacity)
	if t.MinReclaim != nil {
		line += t.MinReclaim.Of(o.Capacity)
	}
	need := line - o.Available
	for _, p := range m.pending {
		need -= p.usage
	}
	if need <= 0 {
		return // evictions in flight cover it
	}
	r := t.Signal.Resource()
	if r != corev1.ResourceMemory {
		// Disk and pid usage per pod is not measured yet: no pod is evicted
		// on guesses. The condition still shows the pressure.
		return
	}
	var cands []Candidate
	for _, pod := range m.pods.Active() {
		if Critical(pod) {
			continue
		}
		if _, inFlight := m.pending[pod.UID]; inFlight {
			continue
		}
		requests := qos.PodRequests(pod)
		c := Candidate{Pod: pod, Request: requests.Memory().Value()}
		c.Usage, c.HasStats = m.usage.Memory(pod)
		cands = append(cands, c)
	}
	if len(cands) == 0 {
		m.opts.Log.Warn("eviction threshold met but no pod can be evicted", "threshold", t.String(), "available", o.Available)
		return
	}
	Rank(cands, r, m.opts.Ranking)
	victims := Select(cands, need)
	decided := m.opts.Clock.Now()

	m.nextID++
	tr := Trace{
		ID: m.nextID, Signal: t.Signal, Threshold: t.String(), ThresholdBytes: t.Value.Of(o.Capacity), Available: o.Available, Need: need,
		ObservedAt: o.Time, WokeAt: woke, DecidedAt: decided, Ranking: m.opts.Ranking,
	}
	res := t.Signal.Resource()
	m.opts.Event(corev1.EventTypeWarning, "EvictionThresholdMet", "Attempting to reclaim "+string(res))
	var wg sync.WaitGroup
	results := make([]error, len(victims))
	for i, v := range victims {
		grace := int64(1)
		if !t.Hard {
			grace = podGrace(v.Pod)
			if max := m.opts.MaxPodGracePeriod; max > 0 && grace > max {
				grace = max
			}
		}
		msg := message(res, t, o, v)
		tr.Victims = append(tr.Victims, Victim{
			Pod: v.Pod.Namespace + "/" + v.Pod.Name, UID: v.Pod.UID, QoS: qos.Class(v.Pod), Priority: Priority(v.Pod),
			Usage: v.Usage, Request: v.Request, Grace: grace, Message: msg,
		})
		m.pending[v.Pod.UID] = pendingEviction{usage: v.Usage, since: decided, trace: tr.ID}
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = m.pods.Evict(v.Pod.UID, grace, msg)
		}()
	}
	// Evict only records the decision and wakes the pod workers; the kills
	// themselves run there, so this wait is short.
	wg.Wait()
	tr.KillSentAt = m.opts.Clock.Now()
	for i, err := range results {
		if err != nil {
			tr.Victims[i].Error = err.Error()
			delete(m.pending, victims[i].Pod.UID)
		}
	}
	m.opts.Log.Info("evicting pods", "threshold", t.String(), "available", o.Available, "need", need, "victims", len(victims),
		"decide_us", decided.Sub(woke).Microseconds())
	m.traces = append(m.traces, tr)
	if len(m.traces) > maxTraces {
		m.traces = m.traces[len(m.traces)-maxTraces:]
	}
}

// expirePendingLocked forgets evictions whose pods are gone (or that took
// too long), and stamps their trace with the time the pressure was relieved.
func (m *Manager) expirePendingLocked(now time.Time) {
	active := map[types.UID]bool{}
	for _, p := range m.pods.Active() {
		active[p.UID] = true
	}
	for uid, p := range m.pending {
		if active[uid] && now.Sub(p.since) < pendingTimeout {
			continue
		}
		delete(m.pending, uid)
		for i := range m.traces {
			if m.traces[i].ID == p.trace && m.traces[i].FreedAt.IsZero() {
				done := true
				for other, q := range m.pending {
					if q.trace == p.trace && other != uid {
						done = false
					}
				}
				if done {
					m.traces[i].FreedAt = now
				}
			}
		}
	}
}

func podGrace(pod *corev1.Pod) int64 {
	if g := pod.Spec.TerminationGracePeriodSeconds; g != nil {
		return *g
	}
	return corev1.DefaultTerminationGracePeriodSeconds
}

// message is the kubelet's eviction message.
func message(res corev1.ResourceName, t Threshold, o Observation, v Candidate) string {
	var b strings.Builder
	fmt.Fprintf(&b, "The node was low on resource: %s. ", res)
	fmt.Fprintf(&b, "Threshold quantity: %s, available: %s. ", quantity(res, t.Value.Of(o.Capacity)), quantity(res, o.Available))
	if v.HasStats && v.Usage > v.Request {
		fmt.Fprintf(&b, "Pod %s was using %s, request is %s, has larger consumption of %s. ", v.Pod.Name, quantity(res, v.Usage), quantity(res, v.Request), res)
	}
	return b.String()
}

func quantity(res corev1.ResourceName, v int64) string {
	if res == corev1.ResourceMemory || res == corev1.ResourceEphemeralStorage {
		return resource.NewQuantity(v, resource.BinarySI).String()
	}
	return resource.NewQuantity(v, resource.DecimalSI).String()
}

// Conditions are the node's pressure conditions, as the kubelet words them.
func (m *Manager) Conditions(now time.Time) []corev1.NodeCondition {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []corev1.NodeCondition
	for _, c := range []struct {
		t               corev1.NodeConditionType
		what, okR, badR string
	}{
		{corev1.NodeMemoryPressure, "memory", "KubeletHasSufficientMemory", "KubeletHasInsufficientMemory"},
		{corev1.NodeDiskPressure, "disk", "KubeletHasNoDiskPressure", "KubeletHasDiskPressure"},
		{corev1.NodePIDPressure, "PID", "KubeletHasSufficientPID", "KubeletHasInsufficientPID"},
	} {
		cond := corev1.NodeCondition{Type: c.t, Status: corev1.ConditionFalse, Reason: c.okR, LastHeartbeatTime: metav1.NewTime(now)}
		switch c.t {
		case corev1.NodeMemoryPressure:
			cond.Message = "nodeagent has sufficient memory available"
		case corev1.NodeDiskPressure:
			cond.Message = "nodeagent has no disk pressure"
		default:
			cond.Message = "nodeagent has sufficient PID available"
		}
		if m.pressureLocked(c.t, now) {
			cond.Status, cond.Reason = corev1.ConditionTrue, c.badR
			switch c.t {
			case corev1.NodeMemoryPressure:
				cond.Message = "nodeagent has insufficient memory available"
			case corev1.NodeDiskPressure:
				cond.Message = "nodeagent has disk pressure"
			default:
				cond.Message = "nodeagent has insufficient PID available"
			}
		}
		on := cond.Status == corev1.ConditionTrue
		if tr, ok := m.transitions[c.t]; !ok || tr.status != on {
			m.transitions[c.t] = transition{status: on, since: now}
		}
		cond.LastTransitionTime = metav1.NewTime(m.transitions[c.t].since)
		out = append(out, cond)
	}
	return out
}

func (m *Manager) pressureLocked(c corev1.NodeConditionType, now time.Time) bool {
	last, ok := m.lastObserved[c]
	return ok && now.Sub(last) < m.opts.TransitionPeriod
}

// Admit is the kubelet's admission under pressure: critical pods always
// pass; under MemoryPressure alone only BestEffort pods are refused; under
// DiskPressure or PIDPressure every other pod is. It returns the rejection
// message, or "".
func (m *Manager) Admit(pod *corev1.Pod) string {
	now := m.opts.Clock.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	var conds []string
	for _, c := range []corev1.NodeConditionType{corev1.NodeMemoryPressure, corev1.NodeDiskPressure, corev1.NodePIDPressure} {
		if m.pressureLocked(c, now) {
			conds = append(conds, string(c))
		}
	}
	if len(conds) == 0 || Critical(pod) {
		return ""
	}
	if len(conds) == 1 && conds[0] == string(corev1.NodeMemoryPressure) && qos.Class(pod) != corev1.PodQOSBestEffort {
		return ""
	}
	return fmt.Sprintf("The node had condition: [%s]. ", strings.Join(conds, ", "))
}

// Observations returns the latest readings and the error of the last
// observation, if any.
func (m *Manager) Observations() (Observations, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := Observations{}
	for k, v := range m.obs {
		out[k] = v
	}
	return out, m.obsErr
}

// Traces returns the recorded decisions, oldest first.
func (m *Manager) Traces() []Trace {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]Trace(nil), m.traces...)
}
