package pods

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/distribution/reference"
	"google.golang.org/grpc/codes"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"nodeagent/agent/events"
	"nodeagent/agent/pleg"
	"nodeagent/cri"
	"nodeagent/internal/mounts"
	"nodeagent/internal/qos"
	"nodeagent/internal/sat"
	"nodeagent/probes"
)

// worker drives one pod. Only its own goroutine touches the fields below
// the mutex; the mutex guards what the manager sets.
type worker struct {
	m      *Manager
	uid    types.UID
	pod    *corev1.Pod // nil for an orphan found in the runtime
	log    *slog.Logger
	wakeCh chan struct{}
	born   time.Time // when this worker started: older runtime objects were made by an earlier agent

	mu          sync.Mutex
	terminating bool
	grace       *int64             // overrides the pod's grace period
	cancelSync  context.CancelFunc // interrupts a sync in progress on terminate
	eviction    *evictionRequest   // set by the eviction manager, taken by the worker

	actions         int                      // runtime mutations so far; a sync that made none need not re-inspect
	started         int                      // sandboxes and containers started so far
	waiting         map[string]waitingReason // per container
	messages        map[string]string        // termination messages by container ID, read once
	oomKilled       map[string]bool          // containers the pod cgroup's OOM-kill counter shows were OOM killed
	oomSeen         int                      // OOM kills of the pod cgroup already attributed
	pullFailed      map[string]time.Time     // image -> last failed pull
	syncDelay       time.Duration            // back-off after a failed pod-level step
	startTime       metav1.Time
	attempted       *uint32         // the last sandbox attempt asked for: a failed one may still hold its name
	failed          *terminalReason // the agent ended the pod (activeDeadlineSeconds, eviction)
	stopGrace       *int64          // grace for stopping a failed pod (eviction), else the pod's
	volumesReleased bool            // a finished pod's volumes are torn down
	lastPhase       corev1.PodPhase
	appsExited      bool // every app container exited for good (appsDone)
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
	return &worker{
		m: m, uid: uid, pod: pod, log: log, born: m.clock.Now(),
		wakeCh:      make(chan struct{}, 1),
		terminating: pod == nil,
		waiting:     map[string]waitingReason{},
		messages:    map[string]string{},
		oomKilled:   map[string]bool{},
		pullFailed:  map[string]time.Time{},
	}
}

func (w *worker) wake() {
	select {
	case w.wakeCh <- struct{}{}:
	default:
	}
}

// overrideGrace sets the grace period the pod will be stopped with,
// instead of its own, before anything asks for the stop.
func (w *worker) overrideGrace(grace *int64) {
	w.mu.Lock()
	w.grace = grace
	w.mu.Unlock()
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

// evictionRequest is the eviction manager's order for a pod.
type evictionRequest struct {
	message string
	grace   int64
}

// evict makes the pod Failed/Evicted and stops it with grace seconds.
func (w *worker) evict(message string, grace int64) {
	w.mu.Lock()
	w.eviction = &evictionRequest{message: message, grace: grace}
	if w.cancelSync != nil {
		w.cancelSync()
	}
	w.mu.Unlock()
	w.wake()
}

func (w *worker) evicting() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.eviction != nil
}

func (w *worker) isTerminating() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.terminating
}

func (w *worker) run(ctx context.Context) {
	defer w.m.workerDone(w)
	for ctx.Err() == nil {
		if w.isTerminating() {
			w.terminatePod(ctx)
			return
		}
		syncCtx, cancel := context.WithCancel(ctx)
		w.mu.Lock()
		w.cancelSync = cancel
		w.mu.Unlock()
		startedBefore := w.started
		next := w.sync(syncCtx)
		cancel()
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

// sync moves the pod one step towards its spec and publishes its status.
// It returns when it next wants to run (a back-off expiring), or 0.
func (w *worker) sync(ctx context.Context) time.Duration {
	pod := w.pod
	rt := w.m.cache.Get(w.uid)
	if w.seen.IsZero() {
		// A pod adopted with its sandbox was started by someone else.
		w.seen, w.startReported = w.m.clock.Now(), len(rt.GetSandboxes()) > 0
	}
	if w.startTime.IsZero() {
		w.startTime = metav1.NewTime(w.m.clock.Now())
		if n := len(rt.GetSandboxes()); n > 0 {
			w.startTime = metav1.NewTime(time.Unix(0, rt.Sandboxes[n-1].CreatedAt))
		}
	}
	w.mu.Lock()
	ev := w.eviction
	w.mu.Unlock()
	if ev != nil && w.failed == nil {
		w.failed = &terminalReason{Reason: "Evicted", Message: ev.message}
		w.stopGrace = &ev.grace
		w.log.Warn("pod evicted", "message", ev.message, "grace_seconds", ev.grace)
		w.event("", corev1.EventTypeWarning, "Evicted", ev.message)
	}
	var untilDeadline time.Duration
	if d := pod.Spec.ActiveDeadlineSeconds; d != nil && w.failed == nil {
		deadline := w.startTime.Add(sat.Seconds(*d))
		if now := w.m.clock.Now(); now.Before(deadline) {
			untilDeadline = deadline.Sub(now)
		} else {
			w.failed = &terminalReason{Reason: "DeadlineExceeded", Message: "Pod was active on the node longer than the specified deadline"}
			w.log.Info("pod exceeded its activeDeadlineSeconds; stopping it", "active_deadline_seconds", *d)
			w.event("", corev1.EventTypeNormal, "DeadlineExceeded", w.failed.Message)
		}
	}
	if w.terminal() {
		return w.finish(ctx, rt)
	}

	before := w.actions
	retry, err := w.syncRuntime(ctx, pod, rt)
	if untilDeadline > 0 && (retry == 0 || untilDeadline < retry) {
		retry = untilDeadline
	}
	if err != nil && ctx.Err() == nil {
		if w.syncDelay == 0 {
			w.syncDelay = time.Second
		} else {
			w.syncDelay = min(2*w.syncDelay, 10*time.Second)
		}
		w.log.Warn("pod sync failed; will retry", "err", err, "retry_in", w.syncDelay)
		retry = w.syncDelay
	} else if err == nil {
		w.syncDelay = 0
	}
	if w.actions != before {
		rt = w.inspect(ctx, rt)
	}
	w.publish(rt)
	if w.terminal() {
		// Just finished: the sandbox and volumes go now, not at the next
		// runtime event, which a finished pod may never have.
		return w.finish(ctx, rt)
	}
	return retry
}

// terminal reports whether the pod is over: ended by the agent, Succeeded
// or Failed by its own containers, or its app containers are done, which
// leaves only sidecars running (they keep the phase Running until finish
// has stopped them, last first).
func (w *worker) terminal() bool {
	return w.failed != nil || w.appsExited || w.lastPhase == corev1.PodSucceeded || w.lastPhase == corev1.PodFailed
}

// appsDone reports whether every app container has exited for good: none
// will be restarted. The kubelet's computePodActions then kills the pod,
// having nothing to keep running and nothing to start.
func appsDone(pod *corev1.Pod, statuses []corev1.ContainerStatus) bool {
	if len(statuses) != len(pod.Spec.Containers) || len(statuses) == 0 {
		return false
	}
	for i, cs := range statuses {
		t := cs.State.Terminated
		if t == nil || shouldRestart(pod, &pod.Spec.Containers[i], false, t.ExitCode) {
			return false
		}
	}
	return true
}

// finish winds a terminal pod down: nothing restarts, what still runs is
// stopped, and the sandbox (with its IP) and volumes are released. The pod
// stays listed until it is deleted. It returns when to try again if
// something could not be released yet.
func (w *worker) finish(ctx context.Context, rt *pleg.PodRuntime) time.Duration {
	clear(w.waiting)
	var retry time.Duration
	if hasRunning(rt) {
		w.actions++
		if err := w.stopAll(ctx, rt, gracePeriod(w.pod, w.stopGrace)); err != nil && ctx.Err() == nil {
			w.log.Warn("stop finished pod; will retry", "err", err)
		}
		rt = w.inspect(ctx, rt)
		if hasRunning(rt) {
			retry = time.Second
		}
	}
	if !w.volumesReleased && !hasRunning(rt) {
		// As the kubelet tears down a terminated pod's volumes: an
		// eviction gives back the space it was for, a finished pod
		// holds none.
		if err := releaseVolumes(filepath.Join(w.m.opts.RootDir, "pods", string(w.uid))); err != nil {
			w.log.Warn("release a finished pod's volumes; will retry", "err", err)
			retry = 10 * time.Second
		} else {
			w.volumesReleased = true
		}
	}
	w.publish(rt)
	return retry
}

// inspect refreshes the runtime view, keeping the old one on error.
func (w *worker) inspect(ctx context.Context, old *pleg.PodRuntime) *pleg.PodRuntime {
	rt, err := w.m.cache.Inspect(ctx, w.uid)
	if err != nil {
		if ctx.Err() == nil {
			w.log.Warn("inspect pod in runtime", "err", err)
		}
		return old
	}
	return rt
}

// syncRuntime is the kubelet's computePodActions and SyncPod in small: pod
// cgroup, sandbox, the next init container, then every app container.
func (w *worker) syncRuntime(ctx context.Context, pod *corev1.Pod, rt *pleg.PodRuntime) (time.Duration, error) {
	sb := rt.LatestSandbox()
	var sandboxCfg *runtimeapi.PodSandboxConfig
	var err error
	if needsSandbox(pod, sb) {
		if sb != nil && pod.Spec.RestartPolicy == corev1.RestartPolicyNever && len(rt.GetContainers()) > 0 {
			return 0, nil // the kubelet does not re-create the sandbox of a pod that must not restart
		}
		if !pod.Spec.HostNetwork {
			if err := w.m.networkReady(); err != nil {
				// As the kubelet: no sandbox until the runtime's network is up.
				msg := "network is not ready: " + err.Error()
				for _, c := range pod.Spec.Containers {
					w.waiting[c.Name] = waitingReason{Reason: "ContainerCreating", Message: msg}
				}
				w.event("", corev1.EventTypeWarning, "NetworkNotReady", msg)
				return time.Second, nil
			}
		}
		if err := w.m.tree.EnsurePod(pod); err != nil {
			return 0, fmt.Errorf("pod cgroup: %w", err)
		}
		if sb, sandboxCfg, err = w.createSandbox(ctx, pod, rt); err != nil {
			return 0, err
		}
	} else if sandboxCfg, err = w.m.sandboxConfig(pod, sb.GetMetadata().GetAttempt(), w.cgroupParent(pod)); err != nil {
		return 0, err
	}
	podIP := sb.GetNetwork().GetIp()

	var retry time.Duration
	keep := func(d time.Duration) {
		if d > 0 && (retry == 0 || d < retry) {
			retry = d
		}
	}
	// Init containers run one at a time, in order; sidecars stay running.
	appStarted := false
	for _, c := range rt.GetContainers() {
		if isAppContainer(pod, c.GetMetadata().GetName()) && c.CreatedAt >= sb.CreatedAt {
			appStarted = true
		}
	}
	if !appStarted {
		for i := range pod.Spec.InitContainers {
			c := &pod.Spec.InitContainers[i]
			d, done := w.syncContainer(ctx, pod, c, rt, sb, sandboxCfg, podIP, true)
			keep(d)
			if !done {
				return retry, nil
			}
		}
	}
	for i := range pod.Spec.Containers {
		d, _ := w.syncContainer(ctx, pod, &pod.Spec.Containers[i], rt, sb, sandboxCfg, podIP, false)
		keep(d)
	}
	w.prune(ctx, rt)
	return retry, nil
}

// hasRunning reports whether a container runs or a sandbox is ready.
func hasRunning(rt *pleg.PodRuntime) bool {
	for _, c := range rt.GetContainers() {
		if c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
			return true
		}
	}
	for _, sb := range rt.GetSandboxes() {
		if sb.State == runtimeapi.PodSandboxState_SANDBOX_READY {
			return true
		}
	}
	return false
}

func needsSandbox(pod *corev1.Pod, sb *runtimeapi.PodSandboxStatus) bool {
	if sb == nil || sb.State != runtimeapi.PodSandboxState_SANDBOX_READY {
		return true
	}
	return !pod.Spec.HostNetwork && sb.GetNetwork().GetIp() == ""
}

func isAppContainer(pod *corev1.Pod, name string) bool {
	for _, c := range pod.Spec.Containers {
		if c.Name == name {
			return true
		}
	}
	return false
}

func (w *worker) cgroupParent(pod *corev1.Pod) string {
	if name, ok := w.m.tree.PodCgroup(pod); ok {
		return w.m.tree.Manager().CgroupParent(name)
	}
	return ""
}

// createSandbox stops what is left of an old sandbox and runs a new one
// with the next attempt number. It returns the sandbox and its config.
func (w *worker) createSandbox(ctx context.Context, pod *corev1.Pod, rt *pleg.PodRuntime) (*runtimeapi.PodSandboxStatus, *runtimeapi.PodSandboxConfig, error) {
	var attempt uint32
	if w.attempted != nil {
		attempt = *w.attempted + 1
	}
	if old := rt.LatestSandbox(); old != nil {
		attempt = max(attempt, old.GetMetadata().GetAttempt()+1)
		w.log.Info("pod sandbox changed; it will be killed and re-created", "sandbox", old.Id)
		w.event("", corev1.EventTypeNormal, "SandboxChanged", "Pod sandbox changed, it will be killed and re-created.")
		if err := w.stopAll(ctx, rt, gracePeriod(pod, nil)); err != nil {
			return nil, nil, err
		}
	}
	cfg, err := w.m.sandboxConfig(pod, attempt, w.cgroupParent(pod))
	if err != nil {
		return nil, nil, err
	}
	if err := os.MkdirAll(cfg.LogDirectory, 0o755); err != nil {
		return nil, nil, fmt.Errorf("create pod log directory: %w", err)
	}
	for name := range w.waiting {
		delete(w.waiting, name)
	}
	w.actions++
	w.attempted = &attempt
	id, err := w.m.rt.RunPodSandbox(ctx, cfg, "")
	if err != nil {
		for _, c := range pod.Spec.Containers {
			w.waiting[c.Name] = waitingReason{Reason: "ContainerCreating", Message: "failed to create pod sandbox: " + err.Error()}
		}
		w.event("", corev1.EventTypeWarning, "FailedCreatePodSandBox", "Failed to create pod sandbox: "+err.Error())
		return nil, nil, fmt.Errorf("run pod sandbox: %w", err)
	}
	sb, err := w.m.rt.PodSandboxStatus(ctx, id)
	if err != nil {
		return nil, nil, fmt.Errorf("status of new sandbox: %w", err)
	}
	w.started++
	w.log.Info("sandbox started", "sandbox", shortID(id), "ip", sb.GetNetwork().GetIp(), "attempt", attempt)
	return sb, cfg, nil
}

// syncContainer makes one container match the restart policy. It reports
// when it wants to run again and whether the container is done in the
// init sense (exited 0, or for sidecars, running).
func (w *worker) syncContainer(ctx context.Context, pod *corev1.Pod, c *corev1.Container, rt *pleg.PodRuntime, sb *runtimeapi.PodSandboxStatus,
	sandboxCfg *runtimeapi.PodSandboxConfig, podIP string, init bool) (time.Duration, bool) {
	var current *runtimeapi.ContainerStatus // newest record in this sandbox
	var restartCount int32
	if recs := rt.ContainersNamed(c.Name); len(recs) > 0 {
		if n, err := strconv.Atoi(recs[0].Annotations[cri.AnnotationRestartCount]); err == nil {
			restartCount = int32(n) + 1
		}
		if recs[0].CreatedAt >= sb.CreatedAt {
			current = recs[0]
		}
	}
	sidecar := init && qos.IsSidecar(c)
	if current != nil {
		switch current.State {
		case runtimeapi.ContainerState_CONTAINER_RUNNING:
			delete(w.waiting, c.Name)
			if kind, probeGrace, kill := w.m.probes.Kill(pod.UID, c.Name, current.Id); kill {
				w.killUnhealthy(ctx, pod, c, current, kind, probeGrace, podIP)
				return 0, false
			}
			if sidecar {
				// The containers after a sidecar start once it has started:
				// running, and its startup probe passed (KEP-753). The probe's
				// result wakes the pod.
				return 0, w.m.probes.Started(pod.UID, c.Name, current.Id)
			}
			return 0, !init
		case runtimeapi.ContainerState_CONTAINER_EXITED:
			if current.StartedAt == 0 && current.CreatedAt < w.born.UnixNano() {
				// An earlier agent's start was cut off and the container never
				// ran: replace it without counting a restart.
				w.actions++
				if err := w.m.rt.RemoveContainer(ctx, current.Id); err != nil {
					w.log.Warn("remove container whose start was interrupted; will retry", "container", c.Name, "err", err)
					return time.Second, false
				}
				removeLogs(current.LogPath)
				return w.startContainer(ctx, pod, c, restartCount-1, sb.Id, sandboxCfg, podIP), false
			}
			if init && !sidecar && current.ExitCode == 0 {
				delete(w.waiting, c.Name)
				return 0, true
			}
			if !shouldRestart(pod, c, init, current.ExitCode) {
				delete(w.waiting, c.Name)
				return 0, false
			}
			key := string(pod.UID) + "/" + c.Name + "/" + c.Image
			exitedAt := time.Unix(0, current.FinishedAt)
			if in, until := w.m.restarts.InBackOff(key, exitedAt); in {
				w.waiting[c.Name] = waitingReason{Reason: "CrashLoopBackOff", Message: fmt.Sprintf(
					"back-off %s restarting failed container=%s pod=%s", w.m.restarts.Delay(key), c.Name, pod.Name)}
				w.event(c.Name, corev1.EventTypeWarning, "BackOff", fmt.Sprintf("Back-off restarting failed container %s in pod %s_%s(%s)", c.Name, pod.Name, pod.Namespace, pod.UID))
				return until.Sub(w.m.clock.Now()), false
			}
			w.m.restarts.Next(key, exitedAt)
			w.log.Info("restarting container", "container", c.Name, "exit_code", current.ExitCode, "restart_count", restartCount)
		case runtimeapi.ContainerState_CONTAINER_CREATED:
			// Created but never started (the agent stopped between create
			// and start): start this one rather than make another, so the
			// container runs exactly once and keeps its restart count.
			w.actions++
			if err := w.m.rt.StartContainer(ctx, current.Id); err != nil {
				w.fail(c, "RunContainerError", err)
				return time.Second, false
			}
			w.started++
			delete(w.waiting, c.Name)
			w.event(c.Name, corev1.EventTypeNormal, "Started", "Started container "+c.Name)
			w.postStart(ctx, pod, c, current.Id, podIP)
			return 0, false
		default: // unknown: start over, but never beside one we could not remove
			w.actions++
			if err := w.m.rt.RemoveContainer(ctx, current.Id); err != nil {
				w.log.Warn("remove container in unknown state; will retry", "container", c.Name, "err", err)
				return time.Second, false
			}
		}
	}
	return w.startContainer(ctx, pod, c, restartCount, sb.Id, sandboxCfg, podIP), false
}

// shouldRestart is the restart policy for an exited container.
func shouldRestart(pod *corev1.Pod, c *corev1.Container, init bool, exitCode int32) bool {
	if init && qos.IsSidecar(c) {
		return true
	}
	switch pod.Spec.RestartPolicy {
	case corev1.RestartPolicyNever:
		return false
	case corev1.RestartPolicyOnFailure:
		return exitCode != 0
	}
	return !init || exitCode != 0
}

// startContainer pulls (per imagePullPolicy), creates and starts one
// container. Failures become the container's waiting reason.
func (w *worker) startContainer(ctx context.Context, pod *corev1.Pod, c *corev1.Container, restartCount int32, sandboxID string,
	sandboxCfg *runtimeapi.PodSandboxConfig, podIP string) time.Duration {
	imageRef, retry, ok := w.ensureImage(ctx, pod, c, sandboxCfg)
	if !ok {
		return retry
	}
	if err := w.verifyNonRoot(ctx, pod, c, imageRef); err != nil {
		w.fail(c, "CreateContainerConfigError", err)
		return w.m.opts.ResyncPeriod
	}
	cfg, err := w.m.containerConfig(pod, c, imageRef, restartCount, podIP)
	if err != nil {
		w.fail(c, "CreateContainerConfigError", err)
		return 0
	}
	w.actions++
	id, err := w.m.rt.CreateContainer(ctx, sandboxID, cfg, sandboxCfg)
	if err != nil {
		w.fail(c, "CreateContainerError", err)
		return w.m.opts.ResyncPeriod
	}
	w.event(c.Name, corev1.EventTypeNormal, "Created", "Created container: "+c.Name)
	if err := w.m.rt.StartContainer(ctx, id); err != nil {
		w.fail(c, "RunContainerError", err)
		return w.m.opts.ResyncPeriod
	}
	w.started++
	w.event(c.Name, corev1.EventTypeNormal, "Started", "Started container "+c.Name)
	delete(w.waiting, c.Name)
	w.log.Debug("container started", "container", c.Name, "container_id", shortID(id), "restart_count", restartCount)
	w.postStart(ctx, pod, c, id, podIP)
	return 0
}

// postStart runs the container's postStart hook before anything else of
// the pod starts; on failure the container is killed and its restart
// policy decides what follows.
func (w *worker) postStart(ctx context.Context, pod *corev1.Pod, c *corev1.Container, id, podIP string) {
	if c.Lifecycle == nil || c.Lifecycle.PostStart == nil {
		return
	}
	err := w.m.hooks.RunHook(ctx, c.Lifecycle.PostStart, probes.Target{PodIP: w.targetIP(podIP), ContainerID: id, Container: c})
	if err == nil || ctx.Err() != nil {
		return
	}
	// The event leaves the error out (it may hold secrets); the log has it.
	w.log.Warn("postStart hook failed; killing the container", "container", c.Name, "err", err)
	w.event(c.Name, corev1.EventTypeWarning, "FailedPostStartHook", "PostStartHook failed")
	w.actions++
	rec := &runtimeapi.ContainerStatus{Id: id, Metadata: &runtimeapi.ContainerMetadata{Name: c.Name}, State: runtimeapi.ContainerState_CONTAINER_RUNNING}
	if err := w.stopContainer(ctx, rec, gracePeriod(pod, nil), podIP, "FailedPostStartHook"); err != nil {
		w.log.Warn("kill container after its postStart hook failed", "container", c.Name, "err", err)
	}
}

// killUnhealthy stops a container whose liveness or startup probe failed,
// with the probe's grace period when it sets one.
func (w *worker) killUnhealthy(ctx context.Context, pod *corev1.Pod, c *corev1.Container, rec *runtimeapi.ContainerStatus, kind probes.Kind, probeGrace *int64, podIP string) {
	grace := gracePeriod(pod, nil)
	if probeGrace != nil {
		grace = max(*probeGrace, 2)
	}
	w.log.Info("container failed its probe; killing it", "container", c.Name, "probe", strings.ToLower(string(kind)), "grace_seconds", grace)
	w.actions++
	msg := fmt.Sprintf("Container %s failed %s probe, will be restarted", c.Name, strings.ToLower(string(kind)))
	if err := w.stopContainer(ctx, rec, grace, podIP, msg); err != nil {
		w.log.Warn("kill unhealthy container", "container", c.Name, "err", err)
	}
}

func (w *worker) fail(c *corev1.Container, reason string, err error) {
	var crierr *cri.Error
	msg := err.Error()
	if errors.As(err, &crierr) {
		msg = crierr.Msg
	}
	w.waiting[c.Name] = waitingReason{Reason: reason, Message: msg}
	w.log.Warn("container failed to start", "container", c.Name, "reason", reason, "err", msg)
	w.event(c.Name, corev1.EventTypeWarning, "Failed", "Error: "+reason)
}

// event records an event about the pod, or one of its containers.
func (w *worker) event(container, eventType, reason, message string) {
	if w.pod != nil {
		w.m.events.Event(events.PodRef(w.pod, container), eventType, reason, message)
	}
}

// verifyNonRoot refuses to start a container that must not run as root
// but would (runAsNonRoot), with the kubelet's messages.
func (w *worker) verifyNonRoot(ctx context.Context, pod *corev1.Pod, c *corev1.Container, imageRef string) error {
	var nonRoot *bool
	var uid *int64
	if sc := pod.Spec.SecurityContext; sc != nil {
		nonRoot, uid = sc.RunAsNonRoot, sc.RunAsUser
	}
	if sc := c.SecurityContext; sc != nil {
		if sc.RunAsNonRoot != nil {
			nonRoot = sc.RunAsNonRoot
		}
		if sc.RunAsUser != nil {
			uid = sc.RunAsUser
		}
	}
	if nonRoot == nil || !*nonRoot {
		return nil
	}
	where := fmt.Sprintf("(pod: %q, container: %s)", pod.Name+"_"+pod.Namespace+"("+string(pod.UID)+")", c.Name)
	if uid != nil {
		if *uid == 0 {
			return fmt.Errorf("container's runAsUser breaks non-root policy %s", where)
		}
		return nil
	}
	img, err := w.m.rt.ImageStatus(ctx, imageRef)
	if err != nil {
		return err
	}
	switch {
	case img.GetUid() != nil && img.GetUid().Value != 0:
		return nil
	case img.GetUid() == nil && img.GetUsername() != "":
		return fmt.Errorf("container has runAsNonRoot and image has non-numeric user (%s), cannot verify user is non-root %s", img.GetUsername(), where)
	}
	return fmt.Errorf("container has runAsNonRoot and image will run as root %s", where)
}

// ensureImage honours imagePullPolicy, with the kubelet's reasons and the
// image pull back-off (10 s doubling to 300 s).
func (w *worker) ensureImage(ctx context.Context, pod *corev1.Pod, c *corev1.Container, sandboxCfg *runtimeapi.PodSandboxConfig) (string, time.Duration, bool) {
	if _, err := reference.ParseNormalizedNamed(c.Image); err != nil {
		msg := fmt.Sprintf("Failed to apply default image tag %q: couldn't parse image name %q: %v", c.Image, c.Image, err)
		w.waiting[c.Name] = waitingReason{Reason: "InvalidImageName", Message: msg}
		w.event(c.Name, corev1.EventTypeWarning, "InspectFailed", msg)
		return "", w.m.opts.ResyncPeriod, false
	}
	if c.ImagePullPolicy != corev1.PullAlways {
		img, err := w.m.rt.ImageStatus(ctx, c.Image)
		if err != nil {
			w.fail(c, "ErrImagePull", err)
			return "", w.m.opts.ResyncPeriod, false
		}
		if img != nil {
			w.event(c.Name, corev1.EventTypeNormal, "Pulled", fmt.Sprintf("Container image %q already present on machine", c.Image))
			return img.Id, 0, true
		}
		if c.ImagePullPolicy == corev1.PullNever {
			msg := fmt.Sprintf("Container image %q is not present with pull policy of Never", c.Image)
			w.waiting[c.Name] = waitingReason{Reason: "ErrImageNeverPull", Message: msg}
			w.event(c.Name, corev1.EventTypeWarning, "ErrImageNeverPull", msg)
			return "", w.m.opts.ResyncPeriod, false
		}
	}
	key := string(pod.UID) + "/" + c.Image
	if failed, ok := w.pullFailed[c.Image]; ok {
		if in, until := w.m.imagePulls.InBackOff(key, failed); in {
			msg := fmt.Sprintf("Back-off pulling image %q", c.Image)
			w.waiting[c.Name] = waitingReason{Reason: "ImagePullBackOff", Message: msg}
			w.event(c.Name, corev1.EventTypeNormal, "BackOff", msg)
			w.event(c.Name, corev1.EventTypeWarning, "Failed", "Error: ImagePullBackOff")
			return "", until.Sub(w.m.clock.Now()), false
		}
	}
	w.event(c.Name, corev1.EventTypeNormal, "Pulling", fmt.Sprintf("Pulling image %q", c.Image))
	pullStart := w.m.clock.Now()
	ref, err := w.m.rt.PullImage(ctx, c.Image, sandboxCfg)
	w.pulling += w.m.clock.Since(pullStart)
	if err != nil {
		now := w.m.clock.Now()
		w.pullFailed[c.Image] = now
		w.m.imagePulls.Next(key, now)
		reason := "ErrImagePull"
		var crierr *cri.Error
		if errors.As(err, &crierr) && crierr.Code == codes.InvalidArgument {
			reason = "InvalidImageName"
		}
		w.event(c.Name, corev1.EventTypeWarning, "Failed", fmt.Sprintf("Failed to pull image %q: %v", c.Image, err))
		w.fail(c, reason, err)
		// Sync again soon: inside the back-off window the container then
		// shows ImagePullBackOff, and that sync waits for the window to end.
		return "", time.Second, false
	}
	w.event(c.Name, corev1.EventTypeNormal, "Pulled", fmt.Sprintf("Successfully pulled image %q in %s", c.Image, w.m.clock.Since(pullStart).Round(time.Millisecond)))
	delete(w.pullFailed, c.Image)
	return ref, 0, true
}

// prune is the pod's share of garbage collection: the two newest records
// of every container (current state and lastState) are kept and older
// exited ones removed with their logs; old sandboxes that are not ready and
// hold no containers are removed, as the kubelet's sandbox GC does.
func (w *worker) prune(ctx context.Context, rt *pleg.PodRuntime) {
	for _, c := range deadContainers(rt, 2) {
		w.actions++
		if err := w.m.rt.RemoveContainer(ctx, c.Id); err != nil {
			w.log.Warn("remove old container", "container", c.GetMetadata().GetName(), "err", err)
			continue
		}
		removeLogs(c.LogPath)
	}
	sandboxes := rt.GetSandboxes() // newest first
	for i := 1; i < len(sandboxes); i++ {
		sb := sandboxes[i]
		if sb.State == runtimeapi.PodSandboxState_SANDBOX_READY || holdsContainers(rt, sb.CreatedAt, sandboxes[i-1].CreatedAt) {
			continue
		}
		w.actions++
		if err := w.m.rt.RemovePodSandbox(ctx, sb.Id); err != nil {
			w.log.Warn("remove dead sandbox", "sandbox", shortID(sb.Id), "err", err)
		}
	}
}

// deadContainers are the exited containers beyond the keep newest
// records of each container name.
func deadContainers(rt *pleg.PodRuntime, keep int) []*runtimeapi.ContainerStatus {
	var out []*runtimeapi.ContainerStatus
	seen := map[string]int{}
	for _, c := range rt.GetContainers() { // newest first
		name := c.GetMetadata().GetName()
		seen[name]++
		if seen[name] > keep && c.State == runtimeapi.ContainerState_CONTAINER_EXITED {
			out = append(out, c)
		}
	}
	return out
}

// holdsContainers reports whether some container was created in the
// lifetime of a sandbox, between its creation and the next sandbox's.
func holdsContainers(rt *pleg.PodRuntime, from, until int64) bool {
	for _, c := range rt.GetContainers() {
		if c.CreatedAt >= from && c.CreatedAt < until {
			return true
		}
	}
	return false
}

// publish computes the pod's status and stores it, logging transitions.
func (w *worker) publish(rt *pleg.PodRuntime) {
	pod := w.pod.DeepCopy()
	var previous corev1.PodStatus
	if old, ok := w.m.store.Get(w.uid); ok {
		previous = old.Status
	}
	w.readTerminationMessages(rt)
	pod.Status = computeStatus(statusInput{
		pod: w.pod, rt: rt, waiting: w.waiting, messages: w.messages, oomKilled: w.oomKilled, previous: previous, terminal: w.failed,
		hostIP: w.m.opts.NodeIP, runtimeName: w.m.opts.RuntimeName, startTime: w.startTime, now: w.m.clock.Now(), probes: w.m.probes,
	})
	w.m.store.Set(pod)
	w.appsExited = appsDone(pod, pod.Status.ContainerStatuses)
	w.reportStart(&pod.Status)
	w.reportContainers(rt, w.isTerminating())
	if pod.Status.Phase != w.lastPhase || pod.Status.PodIP != w.lastIP {
		ready := 0
		for _, cs := range pod.Status.ContainerStatuses {
			if cs.Ready {
				ready++
			}
		}
		w.log.Info("pod status", "phase", pod.Status.Phase, "ip", pod.Status.PodIP, "qos", pod.Status.QOSClass,
			"ready", fmt.Sprintf("%d/%d", ready, len(pod.Spec.Containers)))
		w.lastPhase, w.lastIP = pod.Status.Phase, pod.Status.PodIP
	}
}

// reportStart measures the pod's start the first time all its containers
// run, as the kubelet's pod start metrics do.
func (w *worker) reportStart(st *corev1.PodStatus) {
	if w.startReported || w.m.podStarted == nil || st.Phase != corev1.PodRunning {
		return
	}
	for _, cs := range st.ContainerStatuses {
		if cs.State.Running == nil {
			return
		}
	}
	w.startReported = true
	total := w.m.clock.Since(w.seen)
	sli := total - w.pulling
	for _, cs := range st.InitContainerStatuses {
		if t := cs.State.Terminated; t != nil && !t.StartedAt.IsZero() {
			sli -= t.FinishedAt.Sub(t.StartedAt.Time)
		}
	}
	w.m.podStarted(total, max(sli, 0))
}

// reportContainers tells the probe manager the newest container of each
// name, so probes follow restarts.
func (w *worker) reportContainers(rt *pleg.PodRuntime, terminating bool) {
	if w.pod == nil {
		return
	}
	var states []probes.ContainerState
	for _, list := range [][]corev1.Container{w.pod.Spec.InitContainers, w.pod.Spec.Containers} {
		for _, c := range list {
			recs := rt.ContainersNamed(c.Name)
			if len(recs) == 0 {
				continue
			}
			states = append(states, probes.ContainerState{Name: c.Name, ID: recs[0].Id,
				Running:   recs[0].State == runtimeapi.ContainerState_CONTAINER_RUNNING,
				StartedAt: time.Unix(0, recs[0].StartedAt)})
		}
	}
	podIP := ""
	if sb := rt.LatestSandbox(); sb != nil && sb.State == runtimeapi.PodSandboxState_SANDBOX_READY {
		podIP = sb.GetNetwork().GetIp()
	}
	w.m.probes.UpdatePod(w.uid, w.targetIP(podIP), terminating, states)
}

// readTerminationMessages reads each exited container's message once and
// forgets those of containers that are gone.
func (w *worker) readTerminationMessages(rt *pleg.PodRuntime) {
	present := map[string]bool{}
	for _, c := range rt.GetContainers() {
		present[c.Id] = true
		if _, done := w.messages[c.Id]; !done && c.State == runtimeapi.ContainerState_CONTAINER_EXITED {
			w.messages[c.Id] = terminationMessage(c)
			w.confirmOOMKill(c)
		}
	}
	for id := range w.messages {
		if !present[id] {
			delete(w.messages, id)
			delete(w.oomKilled, id)
		}
	}
}

// confirmOOMKill marks a container that died of SIGKILL (137) as OOM killed
// when the runtime did not say so but the pod cgroup's OOM-kill counter
// went up; each kill is attributed once.
func (w *worker) confirmOOMKill(c *runtimeapi.ContainerStatus) {
	if w.pod == nil {
		return
	}
	kills, err := w.m.tree.OOMKills(w.pod)
	if err != nil {
		return
	}
	if c.Reason == "OOMKilled" {
		w.oomSeen++ // the runtime said so; the counter already holds this kill
		return
	}
	if c.ExitCode == 137 && kills > w.oomSeen {
		w.oomSeen++
		w.oomKilled[c.Id] = true
	}
}

// gracePeriod is the pod's grace period with the kubelet's two-second
// minimum between the stop signal and SIGKILL; an explicit override (a
// delete with --grace-period) wins, and 0 there means SIGKILL at once.
func gracePeriod(pod *corev1.Pod, override *int64) int64 {
	if override != nil {
		return max(*override, 0)
	}
	grace := int64(corev1.DefaultTerminationGracePeriodSeconds)
	if pod != nil && pod.Spec.TerminationGracePeriodSeconds != nil {
		grace = *pod.Spec.TerminationGracePeriodSeconds
	}
	return max(grace, 2)
}

// stopAll stops the pod as the kubelet does: regular containers in
// parallel, then sidecars (restartable init containers) one by one in
// reverse order with what is left of the grace period (at least 2 s each),
// then the sandboxes.
func (w *worker) stopAll(ctx context.Context, rt *pleg.PodRuntime, grace int64) error {
	start := w.m.clock.Now()
	podIP := rt.LatestSandbox().GetNetwork().GetIp()
	var regular, sidecars []*runtimeapi.ContainerStatus
	for _, c := range rt.GetContainers() {
		if c.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
			continue
		}
		if w.sidecarIndex(c.GetMetadata().GetName()) >= 0 {
			sidecars = append(sidecars, c)
		} else {
			regular = append(regular, c)
		}
	}
	sort.Slice(sidecars, func(i, j int) bool {
		return w.sidecarIndex(sidecars[i].GetMetadata().GetName()) > w.sidecarIndex(sidecars[j].GetMetadata().GetName())
	})

	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for _, c := range regular {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := w.stopContainer(ctx, c, grace, podIP, ""); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	for _, c := range sidecars {
		left := grace - int64(w.m.clock.Since(start)/time.Second)
		if grace > 0 {
			left = max(left, 2)
		}
		if err := w.stopContainer(ctx, c, max(left, 0), podIP, ""); err != nil {
			errs = append(errs, err)
		}
	}
	for _, sb := range rt.GetSandboxes() {
		if sb.State == runtimeapi.PodSandboxState_SANDBOX_READY {
			if err := w.m.rt.StopPodSandbox(ctx, sb.Id); err != nil {
				errs = append(errs, fmt.Errorf("stop sandbox: %w", err))
			}
		}
	}
	return errors.Join(errs...)
}

// sidecarIndex is the position of a restartable init container in the
// spec, or -1 (also for every container of an orphan, whose spec is gone).
func (w *worker) sidecarIndex(name string) int {
	if w.pod == nil {
		return -1
	}
	for i := range w.pod.Spec.InitContainers {
		if c := &w.pod.Spec.InitContainers[i]; c.Name == name && qos.IsSidecar(c) {
			return i
		}
	}
	return -1
}

// stopContainer runs the container's preStop hook (when grace > 0) within
// the grace period, then sends the stop signal and SIGKILL after what is
// left of it (at least 2 s). message is the Killing event's text ("":
// "Stopping container <name>"). An orphan's hook and grace period travel
// with the container.
func (w *worker) stopContainer(ctx context.Context, c *runtimeapi.ContainerStatus, grace int64, podIP, message string) error {
	name := c.GetMetadata().GetName()
	ref := corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: c.Labels[cri.LabelPodNamespace], Name: c.Labels[cri.LabelPodName],
		UID: types.UID(c.Labels[cri.LabelPodUID]), FieldPath: fmt.Sprintf("spec.containers{%s}", name)}
	spec := w.containerSpec(name)
	if w.pod != nil {
		ref = events.PodRef(w.pod, name)
	} else {
		if v, err := strconv.ParseInt(c.Annotations[cri.AnnotationTerminationGrace], 10, 64); err == nil {
			grace = max(v, 2)
		}
		spec = specFromAnnotations(name, c.Annotations)
	}
	if message == "" {
		message = "Stopping container " + name
	}
	w.m.events.Event(ref, corev1.EventTypeNormal, "Killing", message)
	if grace > 0 && spec != nil && spec.Lifecycle != nil && spec.Lifecycle.PreStop != nil && c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
		start := w.m.clock.Now()
		hookCtx, cancel := context.WithTimeout(ctx, sat.Seconds(grace))
		err := w.m.hooks.RunHook(hookCtx, spec.Lifecycle.PreStop, probes.Target{PodIP: w.targetIP(podIP), ContainerID: c.Id, Container: spec})
		cancel()
		if err != nil && ctx.Err() == nil {
			w.log.Warn("preStop hook failed; stopping the container anyway", "container", name, "err", err)
			w.m.events.Event(ref, corev1.EventTypeWarning, "FailedPreStopHook", "PreStopHook failed")
		}
		// The hook's whole seconds come out of the grace period.
		grace = max(grace-int64(w.m.clock.Since(start)/time.Second), 2)
	}
	if err := w.m.rt.StopContainer(ctx, c.Id, grace); err != nil {
		return fmt.Errorf("stop container %s: %w", name, err)
	}
	return nil
}

// targetIP is where probes and hooks without a host go: the pod's IP, or
// the node's for a host-network pod (whose sandbox has no IP of its own).
func (w *worker) targetIP(podIP string) string {
	if podIP == "" && w.pod != nil && w.pod.Spec.HostNetwork {
		return w.m.opts.NodeIP
	}
	return podIP
}

// containerSpec finds a container (init or app) of the worker's pod.
func (w *worker) containerSpec(name string) *corev1.Container {
	if w.pod == nil {
		return nil
	}
	for _, list := range [][]corev1.Container{w.pod.Spec.InitContainers, w.pod.Spec.Containers} {
		for i := range list {
			if list[i].Name == name {
				return &list[i]
			}
		}
	}
	return nil
}

// terminatePod stops and removes everything the pod has on the node:
// containers (in parallel, with the grace period), sandboxes, the pod
// cgroup (killing leftovers), its log directory and volumes. It retries
// until it succeeds or the agent stops.
func (w *worker) terminatePod(ctx context.Context) {
	// Liveness and startup stop now; readiness keeps running.
	w.reportContainers(w.m.cache.Get(w.uid), true)
	delay := time.Second
	for {
		err := w.killAndClean(ctx)
		if err == nil {
			// Refresh the cache so the pod stops counting as present.
			w.m.cache.Inspect(ctx, w.uid)
			w.m.store.Delete(w.uid)
			w.m.probes.RemovePod(w.uid, true)
			w.m.restarts.Forget(string(w.uid))
			w.m.imagePulls.Forget(string(w.uid))
			w.log.Info("pod terminated and cleaned up")
			return
		}
		if ctx.Err() != nil {
			return
		}
		w.log.Warn("pod termination incomplete; retrying", "err", err, "retry_in", delay)
		timer := w.m.clock.NewTimer(delay)
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-timer.C():
		}
		delay = min(2*delay, 30*time.Second)
	}
}

func (w *worker) killAndClean(ctx context.Context) error {
	rt, err := w.m.cache.Inspect(ctx, w.uid)
	if err != nil {
		return err
	}
	w.mu.Lock()
	grace := gracePeriod(w.pod, w.grace)
	w.mu.Unlock()
	if err := w.stopAll(ctx, rt, grace); err != nil {
		return err
	}
	var errs []error
	for _, c := range rt.GetContainers() {
		if err := w.m.rt.RemoveContainer(ctx, c.Id); err != nil {
			errs = append(errs, err)
		}
	}
	for _, sb := range rt.GetSandboxes() {
		if err := w.m.rt.RemovePodSandbox(ctx, sb.Id); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	cgroupsFound, err := w.m.tree.PodCgroups()
	if err != nil {
		return err
	}
	if name, ok := cgroupsFound[w.uid]; ok {
		if err := w.m.tree.RemovePod(name); err != nil {
			return err
		}
	}
	for _, dir := range w.podDirs(rt) {
		// Mounts first: RemoveAll would empty what a subPath bind shows.
		if err := mounts.RemoveAll(dir); err != nil {
			return err
		}
	}
	return nil
}

// podDirs are the pod's log directories and its volume directory.
func (w *worker) podDirs(rt *pleg.PodRuntime) []string {
	dirs := []string{filepath.Join(w.m.opts.RootDir, "pods", string(w.uid))}
	seen := map[string]bool{}
	add := func(ns, name string) {
		if ns == "" || name == "" {
			return
		}
		d := filepath.Join(w.m.opts.PodLogsDir, fmt.Sprintf("%s_%s_%s", ns, name, w.uid))
		if !seen[d] {
			seen[d] = true
			dirs = append(dirs, d)
		}
	}
	if w.pod != nil {
		add(w.pod.Namespace, w.pod.Name)
	}
	for _, sb := range rt.GetSandboxes() {
		add(sb.GetMetadata().GetNamespace(), sb.GetMetadata().GetName())
	}
	return dirs
}

// removeLogs deletes a removed container's log and its rotated files, as
// the kubelet does when it removes a container.
func removeLogs(path string) {
	if path == "" {
		return
	}
	rotated, _ := filepath.Glob(path + ".*")
	for _, f := range append(rotated, path) {
		os.Remove(f)
	}
}

// shortID is the 12-character form of a runtime ID, for logs.
func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
