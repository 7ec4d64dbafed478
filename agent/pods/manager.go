package pods

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"nodeagent/agent/events"
	"nodeagent/agent/pods/allocation"
	"nodeagent/agent/pods/criconfig"
	"nodeagent/agent/source"
	"nodeagent/agent/status"
	"nodeagent/agent/volumes"
	"nodeagent/cgroups"
	"nodeagent/internal/layout"
	"nodeagent/internal/notify"
	"nodeagent/manifest"
	"nodeagent/probes"
)

// Manager owns the desired pods, admits them and runs one worker per pod.
type Manager struct {
	opts         Options
	rt           Runtime
	cache        PodCache
	tree         *cgroups.Tree
	store        *status.Store
	events       *events.Recorder
	networkReady func() error
	probes       Probes
	hooks        Hooks
	pressure     Admitter
	changes      Changes
	podStarted   func(total, sli time.Duration)
	onPodSynced  func(operation string, took time.Duration)
	onSandbox    func(userNamespaced, sandboxFailed, syncFailed bool)
	gone         func(pod *corev1.Pod)
	devices      Devices
	cpus         CPUs                // nil: cpuManagerPolicy none
	cpuPool      *notify.Set[string] // the shared CPU pool changed
	userns       UserNamespaces      // nil: hostUsers: false is refused
	pullRecords  PullRecords         // nil: images on the node are every pod's
	killPod      func(pod *corev1.Pod) (int, error)
	clock        clock.WithTicker
	log          *slog.Logger
	configs      *criconfig.Builder
	files        nodeFiles
	volumes      *volumes.Manager
	objects      Objects       // nil when standalone
	restarts     *backOff      // crash-loop back-off per container
	imagePulls   *backOff      // image pull back-off per image
	pullSlot     chan struct{} // nil: pulls run in parallel
	housekeeping time.Duration
	allocated    *allocation.Store // what admitted pods' containers hold (resizeadmit.go)
	preempted    func(signal string)
	shuttingDown func() bool // nil: no graceful node shutdown

	mu       sync.Mutex
	ctx      context.Context // the agent's lifetime; set by Run
	pods     map[types.UID]*corev1.Pod
	rejected map[types.UID]bool
	workers  map[types.UID]*worker
	synced   bool // every source delivered its first desired set
	bySource map[string][]*corev1.Pod
	goneTold map[types.UID]bool // deleted pods Gone was told about
	removed  map[types.UID]removedPod
	desired  map[types.UID]*corev1.Pod // specs whose resize waits (PodResizePending)
	preempt  preemptions
	wg       sync.WaitGroup

	// sweeping: a goroutine removes set-aside pod directories; only it
	// touches sweepFailed (the directories it logged it could not remove).
	sweeping    atomic.Bool
	sweepFailed map[string]bool
	// collectingEvicted: a goroutine removes evicted pods' containers.
	collectingEvicted atomic.Bool
}

// evictedReason is an evicted pod's status.reason (eviction.Reason).
const evictedReason = "Evicted"

// NewManager returns a manager; Run starts it.
func NewManager(opts Options, deps Deps) *Manager {
	if opts.ResyncPeriod <= 0 {
		opts.ResyncPeriod = 10 * time.Second
	}
	if opts.ReconcilePeriod <= 0 {
		opts.ReconcilePeriod = time.Minute
	}
	if deps.NetworkReady == nil {
		deps.NetworkReady = func() error { return nil }
	}
	if deps.Probes == nil {
		deps.Probes = noProbes{}
	}
	if deps.Hooks == nil {
		deps.Hooks = noHooks{}
	}
	if deps.Changes.Runtime == nil {
		deps.Changes.Runtime = notify.NewSet[types.UID]()
	}
	if deps.Changes.Probes == nil {
		deps.Changes.Probes = notify.NewSet[ProbeChange]()
	}
	if deps.Events == nil {
		deps.Events = events.NewRecorder(deps.Clock, opts.NodeName, 0)
	}
	var pullSlot chan struct{}
	if opts.SerializeImagePulls {
		pullSlot = make(chan struct{}, 1)
	}
	vols := volumes.New(volumes.Config{Root: opts.RootDir, Objects: deps.Objects, Allocatable: opts.Allocatable, HostIP: opts.NodeIP,
		Clock: deps.Clock, Limit: opts.VolumeContentLimit})
	files := nodeFiles{root: layout.Root(opts.RootDir), volumes: vols}
	return &Manager{
		pullSlot: pullSlot,
		opts:     opts, rt: deps.Runtime, cache: deps.Cache, tree: deps.Tree, store: deps.Store, events: deps.Events, networkReady: deps.NetworkReady, probes: deps.Probes, hooks: deps.Hooks, pressure: deps.Pressure, changes: deps.Changes, podStarted: deps.PodStarted, onPodSynced: deps.PodSynced, onSandbox: deps.SandboxCreated, gone: deps.Gone, devices: deps.Devices, cpus: deps.CPUs, cpuPool: notify.NewSet[string](), killPod: deps.KillPod, clock: deps.Clock, preempted: deps.Preempted, shuttingDown: deps.ShuttingDown,
		log: deps.Log,
		configs: criconfig.New(criconfig.Options{
			NodeName: opts.NodeName, NodeIP: opts.NodeIP, PodLogsDir: opts.PodLogsDir,
			MemoryCapacity: opts.MemoryCapacity, OOMRange: opts.OOMRange, Allocatable: opts.Allocatable,
			EnforceCPULimits: opts.EnforceCPULimits, CPUPeriod: opts.CPUPeriod, OOMGroupKill: opts.OOMGroupKill, CPUs: deps.CPUs,
			MemoryQoS: opts.MemoryQoS, TieredMemory: opts.TieredMemory, MemoryThrottlingFactor: opts.MemoryThrottlingFactor, AllocatableMemory: opts.AllocatableMemory,
			ClusterDNS: opts.ClusterDNS, ClusterDomain: opts.ClusterDomain, ResolvConf: opts.ResolvConf,
			SeccompRoot: layout.Root(opts.RootDir).Seccomp(), RecursiveReadOnlyMounts: opts.RecursiveReadOnlyMounts, Swap: opts.Swap,
		}, files, deps.Objects),
		volumes:      vols,
		files:        files,
		objects:      deps.Objects,
		userns:       deps.UserNamespaces,
		pullRecords:  deps.PullRecords,
		restarts:     newRestartBackOff(deps.Clock, opts.MaxRestartBackOff),
		imagePulls:   newImagePullBackOff(deps.Clock),
		housekeeping: 2 * time.Second,
		pods:         map[types.UID]*corev1.Pod{},
		rejected:     map[types.UID]bool{},
		workers:      map[types.UID]*worker{},
		bySource:     map[string][]*corev1.Pod{},
		goneTold:     map[types.UID]bool{},
		removed:      map[types.UID]removedPod{},
		desired:      map[types.UID]*corev1.Pod{},
		allocated:    openAllocations(opts.RootDir, deps.Log),
	}
}

// Run applies source updates until ctx is done, then waits for the workers
// to return. Workers stop without touching their pods: an agent shutdown
// leaves pods running.
func (m *Manager) Run(ctx context.Context, updates <-chan source.Update) {
	m.mu.Lock()
	m.ctx = ctx
	m.mu.Unlock()
	housekeeping := m.clock.NewTicker(m.housekeeping)
	defer housekeeping.Stop()
	containerGC := m.clock.NewTicker(containerGCPeriod)
	defer containerGC.Stop()
	reconcile := m.clock.NewTicker(m.opts.ReconcilePeriod)
	defer reconcile.Stop()
	for {
		select {
		case <-ctx.Done():
			m.wg.Wait()
			return
		case u := <-updates:
			m.apply(m.merge(u))
		case <-m.changes.Runtime.Ready():
			for _, uid := range m.changes.Runtime.Take() {
				m.wake(uid)
			}
		case <-m.cpuPool.Ready():
			m.cpuPool.Take()
			m.cpuPoolChanged()
		case <-m.changes.Probes.Ready():
			for _, c := range m.changes.Probes.Take() {
				m.probeResultChanged(c)
			}
		case <-housekeeping.C():
			m.housekeep()
		case <-containerGC.C():
			m.collectEvictedContainers()
		case <-reconcile.C():
			m.Reconcile()
			m.retryResizes()
			m.forgetAllocations()
		}
	}
}

// merge records a source's update and returns the union of every source's
// latest desired set, sources in name order. The sync is complete once
// each source in Options.Sources has sent one (any update, without them).
func (m *Manager) merge(u source.Update) (all source.Update, complete bool) {
	m.bySource[u.Source] = u.Pods
	all.Grace = u.Grace
	names := slices.Sorted(maps.Keys(m.bySource))
	for _, name := range names {
		all.Pods = append(all.Pods, m.bySource[name]...)
	}
	complete = true
	for _, name := range m.opts.Sources {
		if _, ok := m.bySource[name]; !ok {
			complete = false
		}
	}
	return all, complete
}

// apply makes the desired set match u: removed pods terminate, new pods are
// admitted (pods the runtime already runs first, so a restarted agent
// re-adopts before it admits anything new) and get a worker.
func (m *Manager) apply(u source.Update, complete bool) {
	// A pod being deleted (API pods: deletionTimestamp set) is no longer
	// desired: it stops within its deletion grace period.
	desired := map[types.UID]*corev1.Pod{}
	deleting := map[types.UID]*corev1.Pod{}
	for _, p := range u.Pods {
		if p.DeletionTimestamp != nil {
			deleting[p.UID] = p
		} else {
			desired[p.UID] = p
		}
	}
	running := map[types.UID]bool{}
	for _, uid := range m.cache.UIDs() {
		running[uid] = true
	}

	m.mu.Lock()
	changed := false
	for uid, p := range m.pods {
		if _, ok := desired[uid]; ok {
			continue
		}
		delete(m.pods, uid)
		changed = true
		if m.workers[uid] != nil {
			if d := deleting[uid]; d != nil {
				m.stopLocked(uid, p, StopOptions{Grace: d.DeletionGracePeriodSeconds, Why: "deleted"})
			} else if g, ok := u.Grace[uid]; ok {
				m.stopLocked(uid, p, StopOptions{Grace: &g, Why: "deleted on request"})
			} else {
				m.stopLocked(uid, p, StopOptions{Why: "removed from its source"})
			}
		} else if !running[uid] {
			// Never started (it waited for a predecessor): only its
			// placeholder status and its CPUs are left.
			m.store.Delete(uid)
			m.releaseCPUsLocked(uid)
		}
	}
	for uid := range m.rejected {
		if _, ok := desired[uid]; !ok {
			delete(m.rejected, uid)
			m.store.Delete(uid)
		}
	}
	for uid := range m.goneTold {
		if _, ok := deleting[uid]; !ok {
			delete(m.goneTold, uid)
		}
	}
	for uid, p := range deleting {
		switch {
		case m.workers[uid] != nil:
		case running[uid]:
			m.stopLocked(uid, p, StopOptions{Grace: p.DeletionGracePeriodSeconds, Why: "deleted while the agent was away"})
		default:
			m.goneLocked(p)
		}
	}
	if complete && !m.synced {
		m.retainCPUsLocked(desired) // pods gone while the agent was away
	}
	var added []*corev1.Pod
	for uid, p := range desired {
		old, ok := m.pods[uid]
		switch {
		case !ok && !m.rejected[uid]:
			added = append(added, p)
		case ok && old != p && old.ResourceVersion != p.ResourceVersion:
			// An API pod edited in place (an image, activeDeadlineSeconds,
			// labels for the downward API, a resize).
			changed = m.updateLocked(old, p) || changed
		}
	}
	order := map[types.UID]int{}
	for i, p := range u.Pods {
		order[p.UID] = i
	}
	sort.Slice(added, func(i, j int) bool {
		if running[added[i].UID] != running[added[j].UID] {
			return running[added[i].UID]
		}
		return order[added[i].UID] < order[added[j].UID]
	})
	for _, p := range added {
		// A pod the API already shows finished is not run again (its
		// containers may be gone): its status stays what it was.
		if (p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed) && !running[p.UID] {
			m.rejected[p.UID] = true
			m.store.Set(p.DeepCopy())
			continue
		}
		var extended corev1.ResourceList
		if m.devices != nil {
			_, extended = m.devices.Resources()
		}
		p = m.allocatedViewLocked(p, running[p.UID])
		// One the API shows finished whose containers are still on the node
		// is adopted, not admitted again, as the kubelet's
		// HandlePodAdditions; it counts only while something of it runs
		// (leftLocked).
		var r *Rejection
		if !terminalPhase(p.Status.Phase) {
			r = m.admitLocked(p, extended)
		}
		if errs := unsupported(p, m.userns != nil); len(errs) > 0 {
			r = &Rejection{Reason: "UnsupportedPodSpec", Message: errs.ToAggregate().Error()}
		}
		// A node feature the pod needs and the node lacks is said in the
		// kubelet's words, as the scheduler would have kept the pod away.
		if f := featureAdmit(p, m.opts.DeclaredFeatures); f != nil {
			r = f
		}
		// Every source validates; this is the last line before host paths
		// and cgroups are derived from the pod, whatever its source.
		if errs := append(manifest.Validate(p), probes.Validate(p)...); len(errs) > 0 {
			r = &Rejection{Reason: "InvalidPodSpec", Message: errs.ToAggregate().Error()}
		}
		// Pods the runtime already runs were admitted by an earlier agent.
		if r == nil && m.shuttingDown != nil && m.shuttingDown() && !running[p.UID] {
			r = &Rejection{Reason: "NodeShutdown", Message: "Pod was rejected as the node is shutting down."}
		}
		if r == nil && m.pressure != nil && !running[p.UID] {
			if msg := m.pressure.Admit(p); msg != "" {
				r = &Rejection{Reason: evictedReason, Message: msg}
			}
		}
		if r != nil {
			delete(m.preempt.planned, p.UID)
			m.releaseCPUsLocked(p.UID)
			delete(m.desired, p.UID)
			m.rejected[p.UID] = true
			m.rejectLocked(p, r)
			continue
		}
		m.preemptPlannedLocked(p)
		m.allocateLocked(p)
		if terminalPhase(p.Status.Phase) {
			m.store.Set(p.DeepCopy()) // the phase its worker keeps
		}
		m.pods[p.UID] = p
		changed = true
		// The scheduler says this of the API's pods; the agent of its own.
		if !source.FromAPI(p) {
			m.events.Eventf(events.PodRef(p, ""), corev1.EventTypeNormal, "Scheduled", "Successfully assigned %s to %s", fullName(p), m.opts.NodeName)
		}
		m.startIfFreeLocked(p)
	}
	first := !m.synced && complete
	m.synced = m.synced || complete
	if len(m.desired) > 0 && m.retryResizesLocked() { // pods went, came back with a resize, or every source is in
		changed = true
	}
	active := m.admittedLocked()
	m.mu.Unlock()

	if changed {
		if err := m.tree.SyncQoS(active); err != nil {
			m.log.Warn("update QoS cgroups", "err", err)
		}
	}
	if first {
		m.collectOrphans()
		m.removeOrphanedPodDirs()
	}
}

// goneLocked tells Deps.Gone, once per deletion, that a deleted pod has
// nothing left on the node.
func (m *Manager) goneLocked(p *corev1.Pod) {
	if m.gone == nil || m.goneTold[p.UID] {
		return
	}
	m.goneTold[p.UID] = true
	m.gone(p)
}

func (m *Manager) startWorkerLocked(uid types.UID, pod *corev1.Pod) {
	m.reassignCPUsLocked(pod)
	m.launchLocked(newWorker(m, uid, pod))
}

// launchLocked runs w; a worker that must only stop its pod is told so
// before it runs.
func (m *Manager) launchLocked(w *worker) {
	if m.ctx == nil || m.ctx.Err() != nil {
		return
	}
	uid, pod := w.uid, w.pod
	m.workers[uid] = w
	if pod != nil {
		m.probes.AddPod(pod)
	}
	m.wg.Add(1)
	go w.run(m.ctx)
}

// podSynced reports one worker pass (Deps.PodSynced).
func (m *Manager) podSynced(operation string, took time.Duration) {
	if m.onPodSynced != nil {
		m.onPodSynced(operation, took)
	}
}

// workerDone forgets a finished worker, and starts a new one when the pod
// was added again while the old one terminated.
func (m *Manager) workerDone(w *worker) {
	m.mu.Lock()
	defer m.mu.Unlock()
	defer m.wg.Done()
	if m.workers[w.uid] == w {
		delete(m.workers, w.uid)
		m.probes.RemovePod(w.uid, false)
		m.volumes.Forget(w.uid)
		m.victimStoppedLocked(w.uid)
	}
	// Pods that waited for this one (same UID re-added, or same full name)
	// may start now.
	for _, p := range m.pods {
		m.startIfFreeLocked(p)
	}
}

// startIfFreeLocked starts a worker for a desired pod that has none, unless
// a pod of the same full name is still terminating: as the kubelet does
// for static pods, an edited manifest's new pod waits for the old one.
func (m *Manager) startIfFreeLocked(p *corev1.Pod) {
	if m.workers[p.UID] != nil || m.waitsForVictimsLocked(p) {
		return
	}
	for _, w := range m.workers {
		if w.pod != nil && w.pod.Namespace == p.Namespace && w.pod.Name == p.Name && w.isTerminating() {
			if _, listed := m.store.Get(p.UID); !listed {
				m.log.Info("pod waits for its predecessor of the same name to terminate", "pod", fullName(p), "pod_uid", p.UID, "predecessor", w.uid)
				m.store.Set(pendingCopy(p, m.opts.NodeIP))
			}
			return
		}
	}
	m.startWorkerLocked(p.UID, p)
}

// ErrPodNotFound is returned for a pod the manager does not run.
var ErrPodNotFound = errors.New("not found")

// wake tells the pod's worker that its runtime state changed; a pod the
// runtime holds but nobody wants is handed to a terminating worker.
func (m *Manager) wake(uid types.UID) {
	m.mu.Lock()
	w := m.workers[uid]
	m.mu.Unlock()
	if w != nil {
		w.wake()
		return
	}
	m.collectOrphans()
}

// probeResultChanged shows readiness and startup changes in the published
// status at once (also while the worker is busy terminating the pod), and
// wakes the worker to act on liveness and startup failures.
func (m *Manager) probeResultChanged(c ProbeChange) {
	if c.Kind != probes.Liveness {
		m.store.Update(c.UID, func(pod *corev1.Pod) { refreshReadiness(pod, m.probes, m.clock.Now()) })
	}
	m.wake(c.UID)
}

func fullName(p *corev1.Pod) string { return p.Namespace + "/" + p.Name }
