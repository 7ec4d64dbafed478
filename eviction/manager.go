package eviction

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/utils/clock"

	"nodeagent/internal/qos"
	"nodeagent/internal/sat"
)

// Pods is what eviction needs from the pod manager.
type Pods interface {
	// Active lists the admitted pods that still run (not terminal, not
	// already being evicted).
	Active() []*corev1.Pod
	// Evict stops a pod with the eviction's grace seconds and leaves it
	// Failed with reason Evicted and its message.
	Evict(uid types.UID, e Eviction) (Kill, error)
}

// Reason is an evicted pod's status.reason and its event's.
const Reason = "Evicted"

// Eviction is how a pod is evicted.
type Eviction struct {
	Grace   int64
	Message string
	// Annotations go on the Evicted event, as the kubelet's: the starved
	// resource and the offending containers with their usage.
	Annotations map[string]string
	// Disruption gives the pod a DisruptionTarget condition (node
	// pressure; not a local storage limit).
	Disruption bool
	// KillNow: a hard memory threshold's victim, whose processes are
	// SIGKILLed at once through its cgroup once its eviction is recorded
	// (at 1 GiB/s a second of grace is a gigabyte), unless the node stops
	// pods gracefully.
	KillNow bool
}

// Kill is what a KillNow eviction did at once.
type Kill struct {
	Done      bool // the processes were signalled through the cgroup
	Sigkilled int
	Err       error
}

// PodUsage reads a pod's use of a starved resource.
type PodUsage interface {
	// Memory is the pod's working set in bytes.
	Memory(pod *corev1.Pod) (int64, bool)
	// Disk is what the pod holds on the node filesystem: bytes, inodes.
	Disk(pod *corev1.Pod) (bytes, inodes int64, ok bool)
	// EmptyDir is the bytes a disk emptyDir volume of the pod holds; an
	// error means it cannot be measured.
	EmptyDir(pod *corev1.Pod, volume string) (int64, error)
	// ContainerDisk is each container's ephemeral storage, by name: its
	// log directory and, when it shares the node filesystem, its writable
	// layer.
	ContainerDisk(pod *corev1.Pod) (map[string]int64, bool)
	// ImageFs is what the pod's containers hold on the image filesystem
	// (their writable layers): bytes, inodes.
	ImageFs(pod *corev1.Pod) (bytes, inodes int64, ok bool)
	// Containers is each container's usage, by name; nil when unknown.
	Containers(pod *corev1.Pod) map[string]ContainerUsage
}

// ContainerUsage is one container's share of its pod's usage.
type ContainerUsage struct {
	WorkingSet int64
	Processes  int64
}

// Options configure a Manager.
type Options struct {
	Thresholds []Threshold
	// MaxPodGracePeriod caps a pod's grace period on soft evictions
	// (evictionMaxPodGracePeriod); 0 leaves the pod's own.
	MaxPodGracePeriod int64
	// Pressure holds the node conditions the manager sets (default: one
	// without a transition period).
	Pressure *Pressure
	// Alarm wakes the manager on kernel notifications (default: a new one).
	Alarm *Alarm
	// Period is the safety-net poll (default 1 s).
	Period  time.Duration
	Ranking Ranking
	Clock   clock.WithTicker
	Log     *slog.Logger
	// Event records a node event.
	Event func(eventType, reason, message string)
	// Reclaim frees node-level resources for a disk signal before any pod
	// is evicted for it (dead containers, unused images); it returns what
	// it did and whether it removed anything.
	Reclaim func(ctx context.Context, s Signal) (did string, removed bool)
	// LocalStoragePeriod is how often emptyDir sizeLimits are checked
	// (default 10 s, the kubelet's monitoring interval).
	LocalStoragePeriod time.Duration
	// ThreadNice is the niceness of the OS thread Run decides on (-20..19;
	// 0 leaves it). Under CPU contention a normal thread is preempted
	// several times within one decision; a raised one is not.
	ThreadNice int
}

// Manager watches the signals and evicts pods when thresholds are met. The
// deciding path holds no stats collection: observations come in, victims
// are picked from fresh pod usage, kills go out in parallel.
type Manager struct {
	opts  Options
	node  NodeSource
	pods  Pods
	usage PodUsage
	// Metrics are the eviction counters and latency histograms.
	Metrics *Metrics

	mu            sync.Mutex
	obs           Observations
	obsErr        error
	firstObserved map[string]time.Time // threshold key -> first observation meeting it
	reclaiming    map[string]bool      // thresholds met, kept until minimum reclaim is satisfied
	settling      map[Signal]settle    // disk signals: the reclaim whose freed space may still show
	pending       map[types.UID]pendingEviction
	traces        []Trace
	nextID        int
	lastLocal     time.Time // last emptyDir sizeLimit check
	logged        map[string]loggedLine
	lastSync      time.Time // last observation, for Healthy
}

// loggedLine is a line about a persisting state, repeated only when it
// changes or a minute has passed: pressure that nothing can relieve is
// seen every second.
type loggedLine struct {
	text string
	at   time.Time
}

// repeatLocked reports whether the line under key is worth logging now.
func (m *Manager) repeatLocked(key, text string, now time.Time) bool {
	last, ok := m.logged[key]
	if ok && last.text == text && now.Sub(last.at) < time.Minute {
		return false
	}
	m.logged[key] = loggedLine{text, now}
	return true
}

type pendingEviction struct {
	pod    *corev1.Pod
	signal Signal // its usage is of this signal's measure
	usage  int64
	since  time.Time
	trace  int
}

// reclaimSettle is how long a reclaim that removed something has for its
// space to show before pods are evicted for the same pressure, and how
// long a relief it brings must last to end the pressure episode. The
// runtime frees a removed container's layer at its next garbage
// collection, not at RemoveContainer (containerd: up to about a second
// later, then the time to delete the files); the kubelet reads at once
// and would evict a pod for space on its way back. A writer may take the
// freed space back within seconds: that is the same episode, and a soft
// threshold keeps its grace clock, as under the kubelet, whose readings
// 10 s apart (its housekeeping) do not see so short a relief. Once per
// episode, so a reclaim that removes a little every round cannot hold
// evictions off.
const reclaimSettle = 10 * time.Second

// settle is a pressure episode's reclaim that removed something.
type settle struct {
	until  time.Time // evictions wait, and a relief holds the episode, until then
	did    string
	showed bool // a reading found the threshold relieved
}

// holdingLocked tells whether a reclaim's window keeps signal's episode
// open through a reading that finds it relieved.
func (m *Manager) holdingLocked(signal Signal, now time.Time) bool {
	st, ok := m.settling[signal]
	return ok && now.Before(st.until)
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
	if opts.LocalStoragePeriod <= 0 {
		opts.LocalStoragePeriod = 10 * time.Second
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
	if opts.Pressure == nil {
		opts.Pressure = NewPressure(0, opts.Clock)
	}
	if opts.Alarm == nil {
		opts.Alarm = NewAlarm()
	}
	return &Manager{
		opts: opts, node: node, pods: pods, usage: usage, Metrics: newMetrics(opts.Thresholds),
		firstObserved: map[string]time.Time{}, reclaiming: map[string]bool{}, settling: map[Signal]settle{}, pending: map[types.UID]pendingEviction{}, logged: map[string]loggedLine{},
	}
}

// Run synchronizes every period and whenever the alarm rings, until ctx
// ends.
func (m *Manager) Run(ctx context.Context) {
	// Decide on a thread of its own, never unlocked: the runtime ends it
	// with this goroutine, so its priority goes nowhere else.
	runtime.LockOSThread()
	if n := m.opts.ThreadNice; n != 0 {
		if err := unix.Setpriority(unix.PRIO_PROCESS, unix.Gettid(), n); err != nil {
			m.opts.Log.Warn("cannot raise the eviction thread's priority; decisions may wait for a CPU on a busy node", "nice", n, "err", err)
		}
	}
	ticker := m.opts.Clock.NewTicker(m.opts.Period)
	defer ticker.Stop()
	for {
		m.Synchronize(ctx)
		select {
		case <-ctx.Done():
			return
		case <-ticker.C():
		case <-m.opts.Alarm.kick:
		}
	}
}

// Healthy fails when the manager has not observed the node for three
// periods: its loop is stuck (a hung read, a deadlock).
func (m *Manager) Healthy() error {
	m.mu.Lock()
	last := m.lastSync
	m.mu.Unlock()
	if last.IsZero() {
		return nil // not started yet
	}
	if since := m.opts.Clock.Since(last); since > 3*m.opts.Period {
		return fmt.Errorf("no observation of the node for %s (period %s)", since.Round(time.Second), m.opts.Period)
	}
	return nil
}

func key(t Threshold) string { return fmt.Sprintf("%s/%v", t.Signal, t.Hard) }

// Synchronize observes, updates conditions and evicts if a threshold is
// met. It is the kubelet's synchronize, without its one-pod-per-cycle limit.
func (m *Manager) Synchronize(ctx context.Context) {
	woke := m.opts.Clock.Now()
	active := m.pods.Active()
	// Victims' usage is read before the signals: a victim that drained
	// after the reading would otherwise stop counting as on its way out
	// while the reading still shows its memory, and an innocent pod would
	// be taken for it.
	m.mu.Lock()
	m.expirePendingLocked(m.opts.Clock.Now())
	m.mu.Unlock()
	reading := m.opts.Clock.Now()
	obs, err := m.node.Observe(ctx)
	// If the poll had already woken us when the kernel fired, the agent
	// was awake then: the notification still names what the reading shows.
	triggered := m.opts.Alarm.take(reading)
	if !triggered.at.IsZero() && triggered.at.After(woke) {
		woke = triggered.at
	}
	m.mu.Lock()
	step := roundReading
	if m.opts.Reclaim != nil {
		step = roundReclaimFirst
	}
	plan := m.decideLocked(active, obs, err, woke, triggered, step)
	m.mu.Unlock()
	if plan != nil && plan.reclaim != "" {
		plan = m.reclaimThenDecide(ctx, plan.reclaim, active, woke, triggered)
	}
	if local := m.localStorage(active); local != nil {
		m.execute(local)
	}
	if plan != nil {
		m.execute(plan)
	}
	// The readings' kernel notifications, once the kills are out.
	if a, ok := m.node.(interface{ Arm() error }); ok {
		if err := a.Arm(); err != nil {
			m.opts.Log.Debug("some eviction notifications could not be armed; the poll still reads their signals", "err", err)
		}
	}
}

// reclaimThenDecide frees node-level resources for signal, reads the
// signals again and returns the evictions still needed, if any.
func (m *Manager) reclaimThenDecide(ctx context.Context, signal Signal, active []*corev1.Pod, woke time.Time, triggered wakeup) *evictionPlan {
	did, removed := m.opts.Reclaim(ctx, signal)
	m.mu.Lock()
	now := m.opts.Clock.Now()
	repeat := m.repeatLocked("reclaim "+string(signal), did, now)
	episode, settling := m.settling[signal]
	if removed && !settling {
		m.settling[signal] = settle{until: now.Add(reclaimSettle), did: did}
	}
	m.mu.Unlock()
	if repeat {
		m.opts.Log.Info("reclaimed node resources before evicting", "signal", signal, "reclaimed", did)
	}
	obs, err := m.node.Observe(ctx)
	m.mu.Lock()
	defer m.mu.Unlock()
	plan := m.decideLocked(active, obs, err, woke, triggered, roundAfterReclaim)
	if plan != nil {
		plan.trace.Reclaimed = did
		if !removed && settling {
			plan.trace.Reclaimed = episode.did + "; then waited " + reclaimSettle.String() + " for the space"
		}
	}
	return plan
}

// roundStep is which reading of a round a decision is on.
type roundStep int

const (
	roundReading      roundStep = iota // the round's reading, no reclaim configured
	roundReclaimFirst                  // the round's reading; a disk signal reclaims first
	// roundAfterReclaim is the reading after a reclaim: it decides this
	// round's evictions, but a threshold it finds unmet stays in its
	// episode (soft grace clock, minimum reclaim, settle) until the next
	// round's reading. Space a reclaim freed can be taken again within
	// the second, and a soft threshold would then start its grace period
	// over; the kubelet's reclaim reading never enters its bookkeeping.
	roundAfterReclaim
)

// decideLocked updates the bookkeeping with a new observation and returns
// the evictions to make, if any.
func (m *Manager) decideLocked(active []*corev1.Pod, obs Observations, err error, woke time.Time, triggered wakeup, step roundStep) *evictionPlan {
	m.obs, m.obsErr = obs, err
	m.lastSync = m.opts.Clock.Now()
	if err != nil {
		m.opts.Log.Debug("some eviction signals are unavailable; they are not acted on", "err", err)
	}
	now := m.opts.Clock.Now()

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
			m.opts.Pressure.observe(t.Signal.Condition(), now)
		} else if step != roundAfterReclaim && !m.holdingLocked(t.Signal, now) {
			delete(m.firstObserved, key(t))
			delete(m.reclaiming, key(t))
		}
	}
	if step != roundAfterReclaim {
		for sig, st := range m.settling {
			if slices.ContainsFunc(met, func(t Threshold) bool { return t.Signal == sig }) {
				continue
			}
			if now.Before(st.until) {
				if !st.showed {
					st.showed = true
					m.settling[sig] = st
					m.opts.Log.Info("the reclaimed space showed", "signal", sig, "after", now.Sub(st.until.Add(-reclaimSettle)).Round(time.Millisecond))
				}
				continue
			}
			delete(m.settling, sig) // relieved past the window: the episode is over
			delete(m.logged, "settle "+string(sig))
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
		return nil
	}
	// Memory first, as the kubelet orders them.
	sort.SliceStable(acting, func(i, j int) bool {
		_, _, a, _ := signalInfo(acting[i].Signal)
		_, _, b, _ := signalInfo(acting[j].Signal)
		return a < b
	})
	t := acting[0]
	if step == roundReclaimFirst && t.Signal.Resource() != corev1.ResourceMemory && t.Signal != PIDAvailable {
		return &evictionPlan{reclaim: t.Signal}
	}
	if st, ok := m.settling[t.Signal]; ok && now.Before(st.until) {
		if m.repeatLocked("settle "+string(t.Signal), "", now) {
			m.opts.Log.Info("waiting for the reclaimed space to show before evicting", "signal", t.Signal, "until", st.until.Format(time.RFC3339Nano))
		}
		return nil
	}
	return m.planLocked(active, t, obs[t.Signal], woke, triggered)
}

// usageOf is the pod's usage in the measure of signal s.
func (m *Manager) usageOf(pod *corev1.Pod, s Signal) (int64, bool) {
	switch s {
	case MemoryAvailable, AllocatableMemoryAvailable:
		return m.usage.Memory(pod)
	case NodeFsAvailable, NodeFsInodesFree:
		bytes, inodes, ok := m.usage.Disk(pod)
		if s == NodeFsInodesFree {
			return inodes, ok
		}
		return bytes, ok
	case ImageFsAvailable, ImageFsInodesFree:
		bytes, inodes, ok := m.usage.ImageFs(pod)
		if s == ImageFsInodesFree {
			return inodes, ok
		}
		return bytes, ok
	case PIDAvailable:
		containers := m.usage.Containers(pod)
		var n int64
		for _, c := range containers {
			n += c.Processes
		}
		return n, containers != nil
	}
	return 0, false
}

// sameMeasure tells whether usage taken for one signal counts against
// another's deficit.
func sameMeasure(a, b Signal) bool {
	return a == b || (a.Resource() == corev1.ResourceMemory && b.Resource() == corev1.ResourceMemory)
}

// evictionPlan is a decision waiting to be carried out: a node-level
// reclaim to try first, or victims.
type evictionPlan struct {
	reclaim Signal
	trace   Trace
	victims []Candidate
	killNow bool // a hard memory threshold: the victims are killed through their cgroups
}

// planLocked picks the smallest set of pods, in rank order, whose usage
// covers the deficit (plus the minimum reclaim) that is not already on its
// way out.
func (m *Manager) planLocked(active []*corev1.Pod, t Threshold, o Observation, woke time.Time, triggered wakeup) *evictionPlan {
	m.reclaiming[key(t)] = true
	line := t.Value.Of(o.Capacity)
	if t.MinReclaim != nil {
		line += t.MinReclaim.Of(o.Capacity)
	}
	r := t.Signal.Resource()
	need := line - o.Available
	for _, p := range m.pending {
		if sameMeasure(p.signal, t.Signal) {
			need -= p.usage
		}
	}
	if need <= 0 {
		return nil // evictions in flight cover it
	}
	var cands []Candidate
	for _, pod := range active {
		if Critical(pod) {
			continue
		}
		if _, inFlight := m.pending[pod.UID]; inFlight {
			continue
		}
		c := Candidate{Pod: pod}
		if r == corev1.ResourceMemory || r == corev1.ResourceEphemeralStorage {
			requests := qos.PodRequests(pod)
			c.Request = sat.Value(*requests.Name(r, resource.BinarySI))
		}
		c.Usage, c.HasStats = m.usageOf(pod, t.Signal)
		cands = append(cands, c)
	}
	if len(cands) == 0 {
		if m.repeatLocked("no victim "+key(t), "", m.opts.Clock.Now()) {
			m.opts.Log.Warn("eviction threshold met but no pod can be evicted", "threshold", t.String(), "available", o.Available)
		}
		return nil
	}
	Rank(cands, r, m.opts.Ranking)
	victims := Select(cands, need)
	decided := m.opts.Clock.Now()

	m.nextID++
	tr := Trace{
		ID: m.nextID, Signal: string(t.Signal), Threshold: t.String(), ThresholdBytes: t.Value.Of(o.Capacity), Available: o.Available, Need: need,
		TriggeredAt: triggered.at, TriggeredBy: triggered.by, ObservedAt: o.Time, WokeAt: woke, DecidedAt: decided, Ranking: string(m.opts.Ranking),
	}
	res := t.Signal.Resource()
	for _, v := range victims {
		grace := int64(1)
		if !t.Hard {
			grace = podGrace(v.Pod)
			if max := m.opts.MaxPodGracePeriod; max > 0 && grace > max {
				grace = max
			}
		}
		tr.Victims = append(tr.Victims, Victim{
			Pod: v.Pod.Namespace + "/" + v.Pod.Name, UID: v.Pod.UID, QoS: qos.Class(v.Pod), Priority: Priority(v.Pod),
			Usage: v.Usage, Request: v.Request, Grace: grace, Message: message(res, t, o, v),
		})
		m.pending[v.Pod.UID] = pendingEviction{pod: v.Pod, signal: t.Signal, usage: v.Usage, since: decided, trace: tr.ID}
	}
	m.opts.Log.Info("evicting pods", "threshold", t.String(), "available", o.Available, "need", need, "victims", len(victims),
		"decide_us", decided.Sub(woke).Microseconds())
	return &evictionPlan{trace: tr, victims: victims, killNow: t.Hard && res == corev1.ResourceMemory}
}

// execute sends the evictions in parallel (Evict only records the order
// and wakes the pod workers, which do the killing) and keeps the trace.
func (m *Manager) execute(p *evictionPlan) {
	if r := Signal(p.trace.Signal).Resource(); r != "" {
		m.opts.Event(corev1.EventTypeWarning, "EvictionThresholdMet", "Attempting to reclaim "+string(r))
	}
	var wg sync.WaitGroup
	results := make([]error, len(p.victims))
	res := Signal(p.trace.Signal).Resource()
	evict := func(i int) {
		// Read here, off the decision path: cadvisor takes a while per
		// container.
		v := p.trace.Victims[i]
		var annotations map[string]string
		if res != "" {
			var usage map[string]ContainerUsage
			if res == corev1.ResourceMemory {
				usage = m.usage.Containers(p.victims[i].Pod)
			}
			var text string
			text, annotations = offendingContainers(p.victims[i].Pod, res, usage, p.victims[i].HasStats)
			v.Message += text
			p.trace.Victims[i].Message = v.Message
		}
		kill, err := m.pods.Evict(v.UID, Eviction{Grace: v.Grace, Message: v.Message, KillNow: p.killNow,
			Annotations: annotations, Disruption: res != ""})
		results[i] = err
		if kill.Done {
			p.trace.Victims[i].KilledAt = m.opts.Clock.Now()
			p.trace.Victims[i].Sigkilled = kill.Sigkilled
			if kill.Err != nil {
				p.trace.Victims[i].KillError = kill.Err.Error()
			}
		}
	}
	if len(p.victims) == 1 {
		// The common case stays on the manager's own (raised) thread: a
		// new goroutine waits for a CPU on a busy node.
		evict(0)
	} else {
		for i := range p.trace.Victims {
			wg.Add(1)
			go func() {
				defer wg.Done()
				evict(i)
			}()
		}
		wg.Wait()
	}
	p.trace.KillSentAt = m.opts.Clock.Now()
	m.Metrics.decided(&p.trace)
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, err := range results {
		if err != nil {
			p.trace.Victims[i].Error = err.Error()
			delete(m.pending, p.trace.Victims[i].UID)
		}
	}
	m.traces = append(m.traces, p.trace)
	if len(m.traces) > maxTraces {
		m.traces = m.traces[len(m.traces)-maxTraces:]
	}
}

// expirePendingLocked follows the evicted pods' usage as it drains and
// forgets those that are done (usage gone, or too long), stamping their
// trace with the time the last victim let go.
func (m *Manager) expirePendingLocked(now time.Time) {
	for uid, p := range m.pending {
		usage, ok := m.usageOf(p.pod, p.signal)
		if ok && usage > drainedAt(p.signal) && now.Sub(p.since) < pendingTimeout {
			p.usage = usage
			m.pending[uid] = p
			continue
		}
		delete(m.pending, uid)
		done := true
		for _, q := range m.pending {
			if q.trace == p.trace {
				done = false
			}
		}
		for i := range m.traces {
			if done && m.traces[i].ID == p.trace && m.traces[i].FreedAt.IsZero() {
				m.traces[i].FreedAt = now
				m.Metrics.freed(now.Sub(m.traces[i].KillSentAt))
			}
		}
	}
}

// drainedAt is the usage below which an evicted pod counts as gone: for
// bytes, what is left is page cache charged to its cgroup and its kept
// logs; for inodes, its log directories and files; processes all go.
func drainedAt(s Signal) int64 {
	switch s {
	case PIDAvailable:
		return 0
	case NodeFsInodesFree, ImageFsInodesFree:
		return 64
	}
	return 4 << 20
}

// localStorage evicts, at most every LocalStoragePeriod and pressure or
// not, the pods over a local storage limit, as the kubelet's
// localStorageEviction: a disk emptyDir over its sizeLimit, then the pod
// over its ephemeral-storage limit, then a container over its own.
func (m *Manager) localStorage(active []*corev1.Pod) *evictionPlan {
	now := m.opts.Clock.Now()
	m.mu.Lock()
	due := now.Sub(m.lastLocal) >= m.opts.LocalStoragePeriod
	if due {
		m.lastLocal = now
	}
	m.mu.Unlock()
	if !due {
		return nil
	}
	var plan *evictionPlan
	for _, pod := range active {
		if Critical(pod) {
			continue
		}
		signal, used, limit, msg := m.overLocalLimit(pod)
		if msg == "" {
			continue
		}
		if plan == nil {
			m.mu.Lock()
			m.nextID++
			plan = &evictionPlan{trace: Trace{ID: m.nextID, Signal: string(signal), Threshold: "local storage limit",
				ObservedAt: now, WokeAt: now, DecidedAt: now, Ranking: string(m.opts.Ranking)}}
			m.mu.Unlock()
		}
		plan.victims = append(plan.victims, Candidate{Pod: pod, Usage: used, Request: limit, HasStats: true})
		plan.trace.Victims = append(plan.trace.Victims, Victim{Pod: pod.Namespace + "/" + pod.Name, UID: pod.UID, QoS: qos.Class(pod),
			Priority: Priority(pod), Usage: used, Request: limit, Grace: 1, Message: msg})
	}
	return plan
}

// overLocalLimit is the first local storage limit the pod is over, with
// the kubelet's message ("" when none).
func (m *Manager) overLocalLimit(pod *corev1.Pod) (signal Signal, used, limit int64, msg string) {
	for _, v := range pod.Spec.Volumes {
		if v.EmptyDir == nil || v.EmptyDir.SizeLimit == nil || v.EmptyDir.Medium == corev1.StorageMediumMemory {
			continue
		}
		limit := sat.Value(*v.EmptyDir.SizeLimit)
		used, err := m.usage.EmptyDir(pod, v.Name)
		if err != nil {
			// The pod writes the tree being measured: one it made
			// unmeasurable (too deep, say) must not hide its usage.
			return EmptyDirLimit, limit, limit, fmt.Sprintf("Usage of EmptyDir volume %q cannot be measured (%v) and is counted as over the limit %q. ", v.Name, err, v.EmptyDir.SizeLimit.String())
		}
		if used > limit {
			return EmptyDirLimit, used, limit, fmt.Sprintf("Usage of EmptyDir volume %q exceeds the limit %q. ", v.Name, v.EmptyDir.SizeLimit.String())
		}
	}
	if q, ok := resourcehelper.PodLimits(pod, resourcehelper.PodResourcesOptions{})[corev1.ResourceEphemeralStorage]; ok {
		if used, _, measured := m.usage.Disk(pod); measured && used > sat.Value(q) {
			return PodEphemeralLimit, used, sat.Value(q), fmt.Sprintf("Pod ephemeral local storage usage exceeds the total limit of containers %s. ", q.String())
		}
	}
	var limited []corev1.Container
	for _, c := range append(append([]corev1.Container(nil), pod.Spec.Containers...), pod.Spec.InitContainers...) {
		if q, ok := c.Resources.Limits[corev1.ResourceEphemeralStorage]; ok && !q.IsZero() {
			limited = append(limited, c)
		}
	}
	if len(limited) == 0 {
		return "", 0, 0, "" // nothing to measure: most pods
	}
	usage, measured := m.usage.ContainerDisk(pod)
	if !measured {
		return "", 0, 0, ""
	}
	for _, c := range limited {
		q := c.Resources.Limits[corev1.ResourceEphemeralStorage]
		if used, limit := usage[c.Name], sat.Value(q); used > limit {
			return ContainerEphemeralLimit, used, limit, fmt.Sprintf("Container %s exceeded its local ephemeral storage limit %q. ", c.Name, q.String())
		}
	}
	return "", 0, 0, ""
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
	if res != corev1.ResourceMemory && v.HasStats && v.Usage > v.Request {
		// Disk is measured per pod, not per container.
		fmt.Fprintf(&b, "Pod %s was using %s, request is %s, has larger consumption of %s. ", v.Pod.Name, quantity(res, v.Usage), quantity(res, v.Request), res)
	}
	return b.String()
}

// offendingContainers is the kubelet's line for each container using
// more memory than it requests, and the Evicted event's annotations: the
// starved resource and those containers with their usage, comma-separated
// (none without the pod's stats). Disk is measured per pod, so no
// container is named for it.
func offendingContainers(pod *corev1.Pod, res corev1.ResourceName, usage map[string]ContainerUsage, hasStats bool) (string, map[string]string) {
	annotations := map[string]string{}
	if !hasStats && len(usage) == 0 {
		return "", annotations
	}
	var b strings.Builder
	var names, used []string
	for _, cs := range [][]corev1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		for _, c := range cs {
			u, ok := usage[c.Name]
			if !ok {
				continue
			}
			request := sat.Value(*c.Resources.Requests.Memory())
			if u.WorkingSet > request {
				q := quantity(corev1.ResourceMemory, u.WorkingSet)
				fmt.Fprintf(&b, "Container %s was using %s, request is %s, has larger consumption of memory. ", c.Name,
					q, quantity(corev1.ResourceMemory, request))
				names, used = append(names, c.Name), append(used, q)
			}
		}
	}
	annotations[annotationOffendingContainers] = strings.Join(names, ",")
	annotations[annotationOffendingContainersUsage] = strings.Join(used, ",")
	annotations[annotationStarvedResource] = string(res)
	return b.String(), annotations
}

// The Evicted event's annotations, the kubelet's keys.
const (
	annotationStarvedResource          = "starved_resource"
	annotationOffendingContainers      = "offending_containers"
	annotationOffendingContainersUsage = "offending_containers_usage"
)

func quantity(res corev1.ResourceName, v int64) string {
	if res == corev1.ResourceMemory || res == corev1.ResourceEphemeralStorage {
		return resource.NewQuantity(v, resource.BinarySI).String()
	}
	return resource.NewQuantity(v, resource.DecimalSI).String()
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
