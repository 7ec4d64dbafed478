package pods

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"nodeagent/agent/events"
	"nodeagent/internal/qos"
	"nodeagent/probes"
)

// execute carries out one container's step and returns when the pod
// wants to sync again (a back-off expiring), or 0.
func (w *worker) execute(ctx context.Context, pod *corev1.Pod, a containerAction, sandboxID string, sandboxCfg *runtimeapi.PodSandboxConfig, podIP string) time.Duration {
	c, current := a.container, a.current
	switch a.step {
	case keepAsIs:
		delete(w.waiting, c.Name)
		return 0
	case startNew:
		return w.startContainer(ctx, pod, c, a.restartCount, sandboxID, sandboxCfg, podIP)
	case restartExited:
		w.log.Info("restarting container", "container", c.Name, "exit_code", current.ExitCode, "restart_count", a.restartCount)
		return w.restart(ctx, pod, c, a.exitedAt, a.restartCount, sandboxID, sandboxCfg, podIP)
	case killUnhealthy, restartUnhealthy:
		delete(w.waiting, c.Name)
		w.killUnhealthy(ctx, pod, c, current, a.probe, a.probeGrace, podIP)
		if a.step == killUnhealthy {
			return 0
		}
		// Restarted whatever its exit code (OnFailure too), in this sync as
		// the kubelet's: the API never sees it terminated.
		w.probeKilled[c.Name] = current.Id
		return w.restart(ctx, pod, c, w.m.clock.Now(), a.restartCount, sandboxID, sandboxCfg, podIP)
	case replaceChanged:
		delete(w.waiting, c.Name)
		// Stopped and started again at once, whatever the restart policy,
		// as the kubelet's one sync does: the API never sees the old one
		// terminated (a transition it forbids under Never and OnFailure).
		if err := w.killChanged(ctx, pod, c, current, podIP); err != nil {
			w.log.Warn("stop changed container; will retry", "container", c.Name, "err", err)
			return time.Second
		}
		return w.startContainer(ctx, pod, c, a.restartCount, sandboxID, sandboxCfg, podIP)
	case replaceResized:
		delete(w.waiting, c.Name)
		grace := gracePeriod(pod, nil)
		w.log.Info("container resized; its resize policy restarts it", "container", c.Name, "grace_seconds", grace)
		w.actions++
		if err := w.stopContainer(ctx, current, grace, podIP, fmt.Sprintf("Container %s resize requires restart", c.Name)); err != nil {
			w.log.Warn("stop resized container; will retry", "container", c.Name, "err", err)
			return time.Second
		}
		return w.startContainer(ctx, pod, c, a.restartCount, sandboxID, sandboxCfg, podIP)
	case replaceCutOff:
		w.actions++
		if err := w.m.removeContainer(ctx, current); err != nil {
			w.log.Warn("remove container whose start was interrupted; will retry", "container", c.Name, "err", err)
			return time.Second
		}
		w.m.removeLogs(current)
		return w.startContainer(ctx, pod, c, a.restartCount, sandboxID, sandboxCfg, podIP)
	case startCreated:
		// Start this one rather than make another, so the container runs
		// exactly once and keeps its restart count.
		w.actions++
		if err := w.m.rt.StartContainer(ctx, current.Id); err != nil {
			w.fail(c, "RunContainerError", err)
			return time.Second
		}
		w.started++
		delete(w.waiting, c.Name)
		w.event(c.Name, corev1.EventTypeNormal, "Started", "Started container "+c.Name)
		w.postStart(ctx, pod, c, current.Id, podIP)
		return 0
	case replaceUnknown:
		// Never beside one that could not be removed.
		w.actions++
		if err := w.m.removeContainer(ctx, current); err != nil {
			w.log.Warn("remove container in unknown state; will retry", "container", c.Name, "err", err)
			return time.Second
		}
		return w.startContainer(ctx, pod, c, a.restartCount, sandboxID, sandboxCfg, podIP)
	}
	return 0
}

// restart starts the container again after it ended at exitedAt, unless
// its back-off holds it: then it waits in CrashLoopBackOff.
func (w *worker) restart(ctx context.Context, pod *corev1.Pod, c *corev1.Container, exitedAt time.Time, restartCount int32, sandboxID string,
	sandboxCfg *runtimeapi.PodSandboxConfig, podIP string) time.Duration {
	key := string(pod.UID) + "/" + c.Name + "/" + c.Image
	if in, until := w.m.restarts.InBackOff(key, exitedAt); in {
		w.waiting[c.Name] = waitingReason{Reason: "CrashLoopBackOff", Message: fmt.Sprintf(
			"back-off %s restarting failed container=%s pod=%s", w.m.restarts.Delay(key), c.Name, pod.Name)}
		w.event(c.Name, corev1.EventTypeWarning, "BackOff", fmt.Sprintf("Back-off restarting failed container %s in pod %s_%s(%s)", c.Name, pod.Name, pod.Namespace, pod.UID))
		return until.Sub(w.m.clock.Now())
	}
	w.m.restarts.Next(key, exitedAt)
	delete(w.probeKilled, c.Name)
	return w.startContainer(ctx, pod, c, restartCount, sandboxID, sandboxCfg, podIP)
}

// shouldRestart is the restart policy for an exited container: a
// sidecar always, an init container only after a failure, the others by
// their restart rules and policies (containerShouldRestart).
func shouldRestart(pod *corev1.Pod, c *corev1.Container, init bool, exitCode int32) bool {
	switch {
	case init && qos.IsSidecar(c):
		return true
	case init && exitCode == 0:
		return false
	}
	return containerShouldRestart(pod, c, exitCode)
}

// startContainer pulls (per imagePullPolicy), creates and starts one
// container. Failures become the container's waiting reason.
func (w *worker) startContainer(ctx context.Context, pod *corev1.Pod, c *corev1.Container, restartCount int32, sandboxID string,
	sandboxCfg *runtimeapi.PodSandboxConfig, podIP string) time.Duration {
	if wait := w.createBackOff(c.Name); wait > 0 {
		return wait
	}
	// Devices first, as the kubelet allocates them at admission: a
	// container waiting for its image holds them already.
	devices, err := w.allocateDevices(ctx, pod, c)
	if err != nil {
		w.fail(c, "UnexpectedAdmissionError", err)
		return w.m.opts.ResyncPeriod
	}
	if retry, ok := w.imageVolumesFor(ctx, pod, c, sandboxCfg); !ok {
		return retry
	}
	imageRef, retry, ok := w.ensureImage(ctx, pod, c, sandboxCfg)
	if !ok {
		return retry
	}
	if err := w.verifyNonRoot(ctx, pod, c, imageRef); err != nil {
		w.fail(c, "CreateContainerConfigError", err)
		return w.m.opts.ResyncPeriod
	}
	cfg, err := w.m.configs.Container(ctx, w.plan, c, imageRef, restartCount, podIP)
	if err != nil {
		w.fail(c, "CreateContainerConfigError", err)
		return 0
	}
	withDevices(cfg, devices)
	if target := ephemeralTarget(pod, c.Name); target != "" {
		// A debug container sees its target's processes.
		recs := w.m.cache.Get(w.uid).ContainersNamed(target)
		if len(recs) == 0 || recs[0].State != runtimeapi.ContainerState_CONTAINER_RUNNING {
			w.fail(c, "CreateContainerConfigError", fmt.Errorf("target container %q is not running", target))
			return w.m.opts.ResyncPeriod
		}
		if sc := cfg.GetLinux().GetSecurityContext(); sc != nil && sc.NamespaceOptions != nil {
			sc.NamespaceOptions.Pid, sc.NamespaceOptions.TargetId = runtimeapi.NamespaceMode_TARGET, recs[0].Id
		}
	}
	w.actions++
	id, err := w.m.rt.CreateContainer(ctx, sandboxID, cfg, sandboxCfg)
	if err != nil {
		w.fail(c, "CreateContainerError", err)
		return w.createFailed(c.Name)
	}
	delete(w.createRetry, c.Name)
	w.event(c.Name, corev1.EventTypeNormal, "Created", "Created container: "+c.Name)
	w.m.linkLog(pod, c.Name, id, filepath.Join(sandboxCfg.GetLogDirectory(), cfg.GetLogPath()))
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

// allocateDevices has the device plugins allocate the container's
// devices (once; a restart keeps them).
func (w *worker) allocateDevices(ctx context.Context, pod *corev1.Pod, c *corev1.Container) ([]*pluginapi.ContainerAllocateResponse, error) {
	if w.m.devices == nil {
		return nil, nil
	}
	return w.m.devices.Allocate(ctx, pod, c)
}

// allocatedDevices is the health of the devices the pod's containers
// hold, for their statuses.
func (w *worker) allocatedDevices() map[string][]corev1.ResourceStatus {
	if w.m.devices == nil {
		return nil
	}
	return w.m.devices.AllocatedStatus(w.uid)
}

// withDevices adds what the device plugins want for the container's
// devices: environment, mounts, device nodes, annotations.
func withDevices(cfg *runtimeapi.ContainerConfig, resps []*pluginapi.ContainerAllocateResponse) {
	for _, r := range resps {
		for _, k := range slices.Sorted(maps.Keys(r.Envs)) {
			cfg.Envs = append(cfg.Envs, &runtimeapi.KeyValue{Key: k, Value: []byte(r.Envs[k])})
		}
		for _, mt := range r.Mounts {
			cfg.Mounts = append(cfg.Mounts, &runtimeapi.Mount{ContainerPath: mt.ContainerPath, HostPath: mt.HostPath, Readonly: mt.ReadOnly})
		}
		for _, d := range r.Devices {
			cfg.Devices = append(cfg.Devices, &runtimeapi.Device{ContainerPath: d.ContainerPath, HostPath: d.HostPath, Permissions: d.Permissions})
		}
		if len(r.Annotations) > 0 && cfg.Annotations == nil {
			cfg.Annotations = map[string]string{}
		}
		maps.Copy(cfg.Annotations, r.Annotations)
	}
}

// ephemeralTarget is the targetContainerName of the named ephemeral
// container, "" for any other container.
func ephemeralTarget(pod *corev1.Pod, name string) string {
	for _, ec := range pod.Spec.EphemeralContainers {
		if ec.Name == name {
			return ec.TargetContainerName
		}
	}
	return ""
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

// killChanged stops a running app container whose spec changed (the image:
// the only field of a container the API lets change, and all the kubelet's
// container hash covers).
func (w *worker) killChanged(ctx context.Context, pod *corev1.Pod, c *corev1.Container, rec *runtimeapi.ContainerStatus, podIP string) error {
	grace := gracePeriod(pod, nil)
	w.log.Info("container definition changed; restarting it", "container", c.Name, "image", c.Image, "grace_seconds", grace)
	w.actions++
	return w.stopContainer(ctx, rec, grace, podIP, fmt.Sprintf("Container %s definition changed, will be restarted", c.Name))
}

func (w *worker) fail(c *corev1.Container, reason string, err error) {
	msg := errorMessage(err)
	w.waiting[c.Name] = waitingReason{Reason: reason, Message: msg}
	w.failures++
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

// createRetry is when a container whose creation the runtime refused may
// be tried again: 1 s, doubling to 10 s. A refused create still makes
// runtime events, which wake the worker; without it, it would try again
// at once, over and over.
type createRetry struct {
	at    time.Time
	delay time.Duration
}

// createFailed records a refused create and returns when to try again.
func (w *worker) createFailed(name string) time.Duration {
	r := w.createRetry[name]
	r.delay = min(max(2*r.delay, time.Second), 10*time.Second)
	r.at = w.m.clock.Now().Add(r.delay)
	if w.createRetry == nil {
		w.createRetry = map[string]createRetry{}
	}
	w.createRetry[name] = r
	return r.delay
}

// createBackOff is how long the container's next create must wait.
func (w *worker) createBackOff(name string) time.Duration {
	if r, ok := w.createRetry[name]; ok {
		return max(r.at.Sub(w.m.clock.Now()), 0)
	}
	return 0
}
