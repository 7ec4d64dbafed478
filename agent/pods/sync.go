package pods

import (
	"context"
	"fmt"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"nodeagent/agent/events"
	"nodeagent/agent/pleg"
	"nodeagent/agent/pods/criconfig"
	"nodeagent/cri"
	"nodeagent/internal/sat"
)

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
		w.startTime = recoveredStartTime(rt, w.m.clock.Now())
	}
	w.mu.Lock()
	f := w.failure
	w.mu.Unlock()
	if f != nil && w.failed == nil {
		w.failed = &terminalReason{Reason: f.Reason, Message: f.Message, Disruption: f.Disruption, ByExits: true}
		w.stopGrace = &f.grace
		w.log.Warn("pod stopped by the node", "reason", f.Reason, "message", f.Message, "grace_seconds", f.grace)
		if f.Event != "" && w.pod != nil {
			w.m.events.AnnotatedEvent(events.PodRef(w.pod, ""), f.Annotations, corev1.EventTypeWarning, f.Event, f.Message)
		}
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
	actions := computePodActions(podState{pod: pod, rt: rt, terminal: w.terminal(), born: w.born, probes: w.m.probes, probeKilled: w.probeKilled,
		removedRestarts: func(name string) (int32, bool) {
			if r, ok := w.resets[name]; ok {
				return r.restartCount, true
			}
			return w.m.removedRestartCount(pod.UID, name)
		},
		resizeRestart: func(c *corev1.Container, rec *runtimeapi.ContainerStatus) bool {
			return w.needsResizeRestart(pod, c, rec)
		},
	})
	// AllContainersRestarting holds while a sync finds a reset to do.
	w.resetting = len(actions.resetAll) > 0
	if actions.killPod {
		return w.finish(ctx, rt)
	}

	if _, listed := w.m.store.Get(w.uid); !listed {
		// Pending from the first sync on, as the kubelet sets the status
		// before SyncPod acts: the sandbox's image pull may take a while.
		w.publish(rt)
	}
	before := w.actions
	refresh, blocked := w.setUpVolumes(ctx, pod)
	var retry time.Duration
	var err error
	if !blocked {
		retry, err = w.syncRuntime(ctx, pod, rt, actions)
	}
	if refresh > 0 && (retry == 0 || refresh < retry) {
		retry = refresh
	}
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

// setUpVolumes writes the pod's configMap, secret, downwardAPI and
// projected volumes, or refreshes them. A volume never written yet keeps
// the pod from starting, with the kubelet's FailedMount event, and is
// tried again with back-off (at once when a referenced object changes);
// one written before keeps its content and the pod runs on. It returns
// when to sync again.
func (w *worker) setUpVolumes(ctx context.Context, pod *corev1.Pod) (time.Duration, bool) {
	if err := w.m.files.makePodDirs(pod.UID); err != nil {
		w.log.Warn("pod directory not made; will retry", "err", err)
		return firstMountDelay, true
	}
	refresh, failures := w.m.volumes.SetUp(ctx, pod)
	if ctx.Err() != nil {
		return 0, true
	}
	blocked := false
	for _, f := range failures {
		blocked = blocked || f.Blocking
		w.log.Warn("volume not set up; will retry", "volume", f.Volume, "err", f.Err, "blocking", f.Blocking)
		w.event("", corev1.EventTypeWarning, "FailedMount", f.Error())
	}
	if len(failures) == 0 {
		w.mountDelay = 0
		return refresh, false
	}
	w.mountDelay = min(max(2*w.mountDelay, firstMountDelay), maxMountDelay)
	if refresh == 0 || w.mountDelay < refresh {
		refresh = w.mountDelay
	}
	return refresh, blocked
}

// A volume that fails is tried again after firstMountDelay, doubled up to
// maxMountDelay, as the kubelet's volume operations back off (500 ms to
// about 2 min). The first retry is short: a pod's first TokenRequest can
// be refused while the node authorizer has not yet seen the pod.
const (
	firstMountDelay = 500 * time.Millisecond
	maxMountDelay   = 2 * time.Minute
)

// terminal reports whether the pod is over: ended by the agent, Succeeded
// or Failed by its own containers, or its app containers are done, which
// leaves only sidecars running (they keep the phase Running until finish
// has stopped them, last first).
func (w *worker) terminal() bool {
	return w.failed != nil || w.appsExited || w.ended
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
	if !hasRunning(rt) {
		w.m.victimStopped(w.uid) // a critical pod that preempted it may start
		if w.m.cpus != nil {
			// As the kubelet drops a terminal pod's CPUs: nothing of it runs.
			w.m.cpus.Release(w.uid)
		}
	}
	if !w.volumesReleased.Load() && !hasRunning(rt) {
		// As the kubelet tears down a terminated pod's volumes: an
		// eviction gives back the space it was for, a finished pod
		// holds none.
		if err := w.m.volumes.TearDown(w.uid); err != nil {
			w.log.Warn("release a finished pod's volumes; will retry", "err", err)
			retry = 10 * time.Second
		} else {
			w.volumesReleased.Store(true)
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

// syncRuntime carries out one sync's podActions, as the kubelet's
// SyncPod does: pod cgroup and sandbox, then each container's step.
func (w *worker) syncRuntime(ctx context.Context, pod *corev1.Pod, rt *pleg.PodRuntime, actions podActions) (retry time.Duration, err error) {
	sb := rt.LatestSandbox()
	var sandboxCfg *runtimeapi.PodSandboxConfig
	w.volumePulls = nil // image volumes are pulled again each sync
	if len(actions.resetAll) > 0 {
		return w.resetAllContainers(ctx, pod, rt, actions.resetAll)
	}
	switch actions.sandbox {
	case sandboxNeverAgain:
		return 0, nil
	case sandboxCreate:
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
		parent, cgErr := w.m.tree.EnsurePod(pod)
		if cgErr != nil {
			return 0, fmt.Errorf("pod cgroup: %w", cgErr)
		}
		w.plan = criconfig.NewPlan(pod, parent)
		var sandboxErr error
		defer w.countSandbox(pod, w.failures, &sandboxErr)
		if sb, sandboxCfg, sandboxErr = w.createSandbox(ctx, pod, rt); sandboxErr != nil {
			return 0, sandboxErr
		}
	default:
		if w.plan == nil {
			// An agent restarted: the pod's running sandbox has its user
			// namespace, read back from the pod's directory.
			plan := criconfig.NewPlan(pod, w.m.tree.CgroupParent(pod))
			if plan.UserNamespace, err = w.userNamespace(ctx, pod); err != nil {
				return 0, err
			}
			w.plan = plan
		}
		// Containers are made from the pod as it is now: a resize (the
		// pod-level limits a container without its own takes) or labels
		// changed since the sandbox.
		w.plan.Pod = pod
		if sandboxCfg, err = w.m.configs.Sandbox(w.plan, sb.GetMetadata().GetAttempt()); err != nil {
			return 0, err
		}
	}
	if actions.sandbox == sandboxKeep {
		// Before containers start, as the kubelet's SyncPod: a resize is
		// applied to what runs now.
		retry = w.syncResize(ctx, pod, rt, sb.Id)
		w.syncCPUSets(ctx, pod, rt)
	}
	// A host-network sandbox has no IP of its own (containerd 2 says
	// none): the pod's IP is the node's, as in its status.
	podIP := w.targetIP(sb.GetNetwork().GetIp())
	for _, a := range actions.containers {
		if d := w.execute(ctx, pod, a, sb.Id, sandboxCfg, podIP); d > 0 && (retry == 0 || d < retry) {
			retry = d
		}
	}
	if !actions.initPending {
		w.prune(ctx, rt)
	}
	return retry, nil
}

// countSandbox reports a sandbox creation once its sync is done: failed
// when the sandbox did, and the sync too when a container failed to start
// after failuresBefore.
func (w *worker) countSandbox(pod *corev1.Pod, failuresBefore int, sandboxErr *error) {
	if w.m.onSandbox == nil {
		return
	}
	userns := pod.Spec.HostUsers != nil && !*pod.Spec.HostUsers
	w.m.onSandbox(userns, *sandboxErr != nil, *sandboxErr != nil || w.failures > failuresBefore)
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
	for name := range w.waiting {
		delete(w.waiting, name)
	}
	// A config the pod spec makes impossible (an FQDN over 64 bytes, a
	// user namespace the runtime lacks) fails as a sandbox that would not
	// start, with the kubelet's event.
	var cfg *runtimeapi.PodSandboxConfig
	var id string
	handler, err := w.runtimeHandler(ctx, pod)
	if err == nil {
		w.plan.UserNamespace, err = w.userNamespace(ctx, pod)
	}
	if err == nil {
		cfg, err = w.m.configs.Sandbox(w.plan, attempt)
	}
	if err == nil {
		cfg.Annotations[cri.AnnotationPodStartTime] = w.startTime.UTC().Format(time.RFC3339Nano)
		if err := os.MkdirAll(cfg.LogDirectory, 0o755); err != nil {
			return nil, nil, fmt.Errorf("create pod log directory: %w", err)
		}
	}
	if err == nil {
		w.actions++
		w.attempted = &attempt
		id, err = w.m.rt.RunPodSandbox(ctx, cfg, handler)
	}
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

// runtimeHandler resolves the pod's runtimeClassName to the CRI handler
// ("": the runtime's default).
func (w *worker) runtimeHandler(ctx context.Context, pod *corev1.Pod) (string, error) {
	class := pod.Spec.RuntimeClassName
	if class == nil || *class == "" {
		return "", nil
	}
	if w.m.objects == nil {
		return "", fmt.Errorf("runtimeClassName %q: runtime classes are read from the API server, and the agent runs without one (--kubeconfig)", *class)
	}
	return w.m.objects.RuntimeHandler(ctx, *class)
}

// userNamespace is the pod's user namespace for its runtime handler
// (nil without a userns manager: admission refused hostUsers: false).
func (w *worker) userNamespace(ctx context.Context, pod *corev1.Pod) (*runtimeapi.UserNamespace, error) {
	if w.m.userns == nil {
		return nil, nil
	}
	handler := ""
	if u := pod.Spec.HostUsers; u != nil && !*u {
		var err error
		if handler, err = w.runtimeHandler(ctx, pod); err != nil {
			return nil, err
		}
	}
	return w.m.userns.Options(pod, handler)
}

// recoveredStartTime is the start time a pod's sandboxes carry (the first
// agent's, across restarts), else the oldest sandbox's creation, else now.
func recoveredStartTime(rt *pleg.PodRuntime, now time.Time) metav1.Time {
	sbs := rt.GetSandboxes()
	for _, sb := range sbs {
		if t, err := time.Parse(time.RFC3339Nano, sb.GetAnnotations()[cri.AnnotationPodStartTime]); err == nil {
			return metav1.NewTime(t)
		}
	}
	if n := len(sbs); n > 0 {
		return metav1.NewTime(time.Unix(0, sbs[n-1].CreatedAt))
	}
	return metav1.NewTime(now)
}
