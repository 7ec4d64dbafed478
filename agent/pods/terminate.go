package pods

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"nodeagent/agent/events"
	"nodeagent/agent/pleg"
	"nodeagent/agent/pods/criconfig"
	"nodeagent/agent/source"
	"nodeagent/cri"
	"nodeagent/internal/layout"
	"nodeagent/internal/mounts"
	"nodeagent/internal/sat"
	"nodeagent/probes"
)

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

// stopAll stops the pod as the kubelet does: every running container at
// once, each with its preStop hook, the sidecars (restartable init
// containers) getting their stop signal in reverse order once the app
// containers stopped (stopOrder); then the sandboxes.
func (w *worker) stopAll(ctx context.Context, rt *pleg.PodRuntime, grace int64) error {
	podIP := rt.LatestSandbox().GetNetwork().GetIp()
	var running []*runtimeapi.ContainerStatus
	var names []string
	for _, c := range rt.GetContainers() {
		if c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
			running = append(running, c)
			names = append(names, c.GetMetadata().GetName())
		}
	}
	order := newStopOrder(w.pod, names, w.m.clock)
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for _, c := range running {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := w.stopInOrder(ctx, c, grace, podIP, "", order); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	for _, sb := range rt.GetSandboxes() {
		if sb.State == runtimeapi.PodSandboxState_SANDBOX_READY {
			if err := w.m.rt.StopPodSandbox(ctx, sb.Id); err != nil {
				errs = append(errs, fmt.Errorf("stop sandbox: %w", err))
			}
		}
	}
	return errors.Join(errs...)
}

// hookSlack is how long a preStop hook may run past the grace period
// before it is cut: past the container's SIGKILL (at least 2 s after the
// grace period), so an exec hook ends with its container, as the
// kubelet's.
const hookSlack = 10 * time.Second

// stopContainer runs the container's preStop hook (when grace > 0) within
// the grace period, then sends the stop signal and SIGKILL after what is
// left of it (at least 2 s). message is the Killing event's text ("":
// "Stopping container <name>"). An orphan's hook and grace period travel
// with the container.
func (w *worker) stopContainer(ctx context.Context, c *runtimeapi.ContainerStatus, grace int64, podIP, message string) error {
	return w.stopInOrder(ctx, c, grace, podIP, message, nil)
}

// stopInOrder is stopContainer that, after the hook, waits for the
// container's turn in order (nil: none) within what is left of the grace
// period.
func (w *worker) stopInOrder(ctx context.Context, c *runtimeapi.ContainerStatus, grace int64, podIP, message string, order *stopOrder) error {
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
		spec = criconfig.SpecFromAnnotations(name, c.Annotations)
	}
	if message == "" {
		message = "Stopping container " + name
	}
	w.m.events.Event(ref, corev1.EventTypeNormal, "Killing", message)
	asked := grace // 0: SIGKILL at once
	if grace > 0 && spec != nil && spec.Lifecycle != nil && spec.Lifecycle.PreStop != nil && c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
		start := w.m.clock.Now()
		// As the kubelet, the stop waits for the hook at most the grace
		// period, but the hook is not cut there: an exec hook lives on
		// until the container is killed. hookSlack only bounds what
		// outlives the container (an HTTP hook to a silent server).
		hookCtx, cancel := context.WithTimeout(ctx, sat.Seconds(grace)+hookSlack)
		done := make(chan struct{})
		go func() {
			defer close(done)
			defer cancel()
			err := w.m.hooks.RunHook(hookCtx, spec.Lifecycle.PreStop, probes.Target{PodIP: w.targetIP(podIP), ContainerID: c.Id, Container: spec})
			if err != nil && ctx.Err() == nil {
				w.log.Warn("preStop hook failed", "container", name, "err", err)
				w.m.events.Event(ref, corev1.EventTypeWarning, "FailedPreStopHook", "PreStopHook failed")
			}
		}()
		limit := w.m.clock.NewTimer(sat.Seconds(grace))
		select {
		case <-done:
		case <-limit.C():
			w.log.Info("preStop hook not completed in the grace period; stopping the container", "container", name, "grace_period", grace)
		case <-ctx.Done():
		}
		limit.Stop()
		// The hook's whole seconds come out of the grace period.
		grace -= int64(w.m.clock.Since(start) / time.Second)
	}
	if grace > 0 {
		grace -= int64(order.waitTurn(ctx, name, sat.Seconds(grace)) / time.Second)
	}
	if asked > 0 {
		grace = max(grace, 2) // the kubelet's minimal shutdown window
	}
	if err := w.m.rt.StopContainer(ctx, c.Id, grace); err != nil {
		return fmt.Errorf("stop container %s: %w", name, err)
	}
	order.stoppedNow(name)
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
			final, _ := w.m.store.Get(w.uid)
			w.m.store.Delete(w.uid)
			w.m.probes.RemovePod(w.uid, true)
			w.m.restarts.Forget(string(w.uid))
			w.m.imagePulls.Forget(string(w.uid))
			if w.m.devices != nil {
				w.m.devices.Release(w.uid)
			}
			// A pod added back under the same UID meanwhile (a static
			// pod's manifest moved out and in) assigns them again as its
			// worker starts.
			w.m.mu.Lock()
			w.m.releaseCPUsLocked(w.uid)
			w.m.mu.Unlock()
			w.log.Info("pod terminated and cleaned up")
			if w.pod != nil {
				if final == nil || final.UID != w.uid {
					final = w.pod
				}
				w.m.mu.Lock()
				w.m.goneLocked(final)
				w.m.mu.Unlock()
			}
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
	// The containers' end states go out before they are removed: a
	// deleted API pod leaves the API server only with a terminal status.
	if w.pod != nil && source.FromAPI(w.pod) {
		if rt, err = w.m.cache.Inspect(ctx, w.uid); err != nil {
			return err
		}
		w.stopped = true
		w.publish(rt)
	}
	w.m.rememberRestarts(w.uid, rt)
	var errs []error
	for _, c := range rt.GetContainers() {
		if err := w.m.removeContainer(ctx, c); err != nil {
			errs = append(errs, err)
			continue
		}
		w.m.removeLogs(c)
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
	if err := w.m.volumes.TearDown(w.uid); err != nil {
		return err
	}
	for _, dir := range w.podDirs(rt) {
		// Mounts first: RemoveAll would empty what a subPath bind shows.
		if err := mounts.RemoveAll(dir); err != nil {
			return err
		}
	}
	if w.m.userns != nil {
		w.m.userns.Release(w.uid)
	}
	return nil
}

// podDirs are the pod's log directories and its volume directory.
func (w *worker) podDirs(rt *pleg.PodRuntime) []string {
	dirs := []string{layout.Root(w.m.opts.RootDir).Pod(w.uid)}
	seen := map[string]bool{}
	add := func(ns, name string) {
		if ns == "" || name == "" {
			return
		}
		d := layout.Logs(w.m.opts.PodLogsDir).Pod(ns, name, w.uid)
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

// removeLogs deletes a removed container's log, its rotated files and its
// link in the container logs directory, as the kubelet does when it
// removes a container.
func (m *Manager) removeLogs(c *runtimeapi.ContainerStatus) {
	if link := m.logLink(c.Labels[cri.LabelPodName], c.Labels[cri.LabelPodNamespace], c.GetMetadata().GetName(), c.Id); link != "" {
		os.Remove(link)
	}
	if c.LogPath == "" {
		return
	}
	rotated, _ := filepath.Glob(c.LogPath + ".*")
	for _, f := range append(rotated, c.LogPath) {
		os.Remove(f)
	}
}

// logLink is the container's log link in Options.ContainerLogLinks, named
// <pod>_<namespace>_<container>-<id>.log (cut to ext4's 255 bytes) as the
// kubelet's in /var/log/containers; "" when links are off.
func (m *Manager) logLink(pod, namespace, container, id string) string {
	if m.opts.ContainerLogLinks == "" || pod == "" || id == "" {
		return ""
	}
	name := fmt.Sprintf("%s_%s_%s-%s", pod, namespace, container, id)
	if len(name) > 255-len(".log") {
		name = name[:255-len(".log")]
	}
	return filepath.Join(m.opts.ContainerLogLinks, name+".log")
}

// linkLog makes the container's log link (tools that tail
// /var/log/containers/*.log find it there); a failure is only logged.
func (m *Manager) linkLog(pod *corev1.Pod, container, id, logPath string) {
	link := m.logLink(pod.Name, pod.Namespace, container, id)
	if link == "" {
		return
	}
	if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
		m.log.Warn("container log link", "err", err)
		return
	}
	os.Remove(link)
	if err := os.Symlink(logPath, link); err != nil {
		m.log.Warn("container log link", "link", link, "err", err)
	}
}
