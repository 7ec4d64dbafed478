package pods

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"nodeagent/agent/pods/criconfig"
)

// worker drives one pod. Only its own goroutine touches the fields below
// the mutex; the mutex guards what the manager sets.
type worker struct {
	m      *Manager
	uid    types.UID
	pod    *corev1.Pod     // nil for an orphan found in the runtime
	plan   *criconfig.Plan // set when the pod's sandbox is first synced
	log    *slog.Logger
	wakeCh chan struct{}
	born   time.Time // when this worker started: older runtime objects were made by an earlier agent

	mu          sync.Mutex
	terminating bool
	grace       *int64               // overrides the pod's grace period
	cancelSync  context.CancelFunc   // interrupts a sync in progress on terminate
	failure     *failureRequest      // set by an eviction, preemption or shutdown, taken by the worker
	kernelOOM   map[string]time.Time // containers the kernel log shows OOM killed, and when
	resize      resizeStatus         // the resize conditions (resizeadmit.go)

	actions         int                      // runtime mutations so far; a sync that made none need not re-inspect
	started         int                      // sandboxes and containers started so far
	failures        int                      // container starts that failed so far
	resets          map[string]resetRecord   // containers the last RestartAllContainers removed
	createRetry     map[string]createRetry   // containers whose create the runtime refused
	resetting       bool                     // a RestartAllContainers reset is under way
	waiting         map[string]waitingReason // per container
	messages        map[string]string        // termination messages by container ID, read once
	oomKilled       map[string]bool          // containers the pod cgroup's OOM-kill counter shows were OOM killed
	oomSeen         int                      // OOM kills of the pod cgroup already attributed
	pullFailed      map[string]time.Time     // image -> last failed pull
	volumePulls     map[string]volumePull    // this sync's failed image volume pulls (nil: not pulled yet)
	syncDelay       time.Duration            // back-off after a failed pod-level step
	mountDelay      time.Duration            // back-off after a volume failed to set up
	startTime       metav1.Time
	attempted       *uint32           // the last sandbox attempt asked for: a failed one may still hold its name
	failed          *terminalReason   // the agent ended the pod (activeDeadlineSeconds, eviction)
	stopGrace       *int64            // grace for stopping a failed pod (eviction), else the pod's
	volumesReleased atomic.Bool       // a finished pod's volumes are torn down (read by Released)
	lastPhase       corev1.PodPhase   // as published
	ended           bool              // the computed phase is terminal, published or held (holdTerminalPhase)
	appsExited      bool              // every app container exited for good (appsDone)
	stopped         bool              // a deleted pod's containers all stopped: its status is final
	next            *corev1.Pod       // an updated spec for the next sync (under mu)
	probeKilled     map[string]string // container name -> ID a probe had killed: restarted whatever its exit code
	lastIP          string
	seen            time.Time     // when this agent first synced the pod
	pulling         time.Duration // spent pulling images for it
	startReported   bool          // its start was measured (or it was adopted running)
}

func newWorker(m *Manager, uid types.UID, pod *corev1.Pod) *worker {
	log := m.log.With("pod_uid", uid)
	if pod != nil {
		log = log.With("pod", fullName(pod))
	}
	w := &worker{
		m: m, uid: uid, pod: pod, log: log, born: m.clock.Now(),
		wakeCh:      make(chan struct{}, 1),
		terminating: pod == nil,
		waiting:     map[string]waitingReason{},
		messages:    map[string]string{},
		oomKilled:   map[string]bool{},
		probeKilled: map[string]string{},
		pullFailed:  map[string]time.Time{},
	}
	// A pod the API already shows finished (adopted after a restart) only
	// winds down and keeps that phase, as the kubelet's pod worker starts
	// such a pod terminating: an evicted pod is not started again.
	if pod != nil && terminalPhase(pod.Status.Phase) {
		w.failed = &terminalReason{Reason: pod.Status.Reason, Message: pod.Status.Message, ByExits: true}
	}
	return w
}

func (w *worker) wake() {
	select {
	case w.wakeCh <- struct{}{}:
	default:
	}
}

// respec hands the worker its pod's updated spec, taken at the next sync.
func (w *worker) respec(p *corev1.Pod) {
	w.mu.Lock()
	w.next = p
	w.mu.Unlock()
	w.wake()
}

// takeSpec switches to the spec respec handed over, if any. w.pod is read
// by the manager under its lock, so it changes under that lock.
func (w *worker) takeSpec() {
	w.mu.Lock()
	next := w.next
	w.next = nil
	w.mu.Unlock()
	if next != nil {
		w.m.mu.Lock()
		w.pod = next
		w.m.mu.Unlock()
	}
}

// terminate asks the worker to stop its pod; grace, when set, overrides
// the pod's grace period.
func (w *worker) terminate(grace *int64) {
	w.mu.Lock()
	w.terminating = true
	if grace != nil {
		w.grace = grace
	}
	if w.cancelSync != nil {
		w.cancelSync()
	}
	w.mu.Unlock()
	w.wake()
}

// failureRequest is an order to stop the pod and leave it Failed.
type failureRequest struct {
	Failure
	grace int64
}

// stopFailed makes the pod Failed as f says and stops it with grace seconds.
func (w *worker) stopFailed(f Failure, grace int64) {
	w.mu.Lock()
	w.failure = &failureRequest{Failure: f, grace: grace}
	if w.cancelSync != nil {
		w.cancelSync()
	}
	w.mu.Unlock()
	w.wake()
}

func (w *worker) evicting() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.failure != nil
}

func (w *worker) isTerminating() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.terminating
}

func (w *worker) run(ctx context.Context) {
	defer w.m.workerDone(w)
	var synced *corev1.Pod // the spec the last sync had
	for ctx.Err() == nil {
		w.takeSpec()
		if w.isTerminating() {
			start := w.m.clock.Now()
			w.terminatePod(ctx)
			w.m.podSynced("kill", w.m.clock.Since(start))
			return
		}
		syncCtx, cancel := context.WithCancel(ctx)
		w.mu.Lock()
		w.cancelSync = cancel
		w.mu.Unlock()
		startedBefore := w.started
		// The kubelet's pod worker operation types.
		op := "sync"
		if synced == nil {
			op = "create"
		} else if synced != w.pod {
			op = "update"
		}
		start := w.m.clock.Now()
		next := w.sync(syncCtx)
		cancel()
		w.m.podSynced(op, w.m.clock.Since(start))
		synced = w.pod
		if w.started != startedBefore {
			continue // progress: the next step (e.g. the next init container) may be possible now
		}

		wait := w.m.opts.ResyncPeriod
		if next > 0 && next < wait {
			wait = next
		}
		timer := w.m.clock.NewTimer(wait)
		select {
		case <-ctx.Done():
		case <-w.wakeCh:
		case <-timer.C():
		}
		timer.Stop()
	}
}

// shortID is the 12-character form of a runtime ID, for logs.
func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
