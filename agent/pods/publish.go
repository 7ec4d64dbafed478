package pods

import (
	"fmt"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"nodeagent/agent/pleg"
	"nodeagent/probes"
)

// publish computes the pod's status and stores it, logging transitions.
func (w *worker) publish(rt *pleg.PodRuntime) {
	pod := w.pod.DeepCopy()
	var previous corev1.PodStatus
	if old, ok := w.m.store.Get(w.uid); ok {
		previous = old.Status
	}
	w.readTerminationMessages(rt)
	w.mu.Lock()
	resize := w.resize.conditions()
	w.mu.Unlock()
	pod.Status = computeStatus(statusInput{
		pod: w.pod, rt: rt, waiting: w.waiting, messages: w.messages, oomKilled: w.oomKilled, previous: previous, terminal: w.failed, stopped: w.stopped,
		hostIP: w.m.opts.NodeIP, runtimeName: w.m.opts.RuntimeName, startTime: w.startTime, now: w.m.clock.Now(), probes: w.m.probes,
		rro: w.m.opts.RecursiveReadOnlyMounts, resets: w.resets, resetting: w.resetting, devices: w.allocatedDevices(),
		resize: resize, podCgroup: w.podCgroupValues,
	})
	w.ended = terminalPhase(pod.Status.Phase)
	holdTerminalPhase(&pod.Status, previous, rt)
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

// holdTerminalPhase keeps a pod's previous phase, reason and message while
// a container of it still runs, as the kubelet's status manager does
// (mergePodStatus): a pod whose init container failed under Never is
// Failed only once its sidecars were stopped.
func holdTerminalPhase(st *corev1.PodStatus, previous corev1.PodStatus, rt *pleg.PodRuntime) {
	if !terminalPhase(st.Phase) || terminalPhase(previous.Phase) {
		return
	}
	for _, c := range rt.GetContainers() {
		if c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
			st.Phase, st.Reason, st.Message = previous.Phase, previous.Reason, previous.Message
			if st.Phase == "" {
				st.Phase = corev1.PodPending
			}
			return
		}
	}
}

func terminalPhase(p corev1.PodPhase) bool {
	return p == corev1.PodSucceeded || p == corev1.PodFailed
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
	w.mu.Lock()
	kernel := maps.Clone(w.kernelOOM)
	w.mu.Unlock()
	for _, c := range rt.GetContainers() {
		present[c.Id] = true
		if c.State != runtimeapi.ContainerState_CONTAINER_EXITED {
			continue
		}
		if _, done := w.messages[c.Id]; !done {
			w.messages[c.Id] = terminationMessage(c)
			w.confirmOOMKill(c)
		}
		// The kernel's word may come after the exit was first seen.
		if _, killed := kernel[c.Id]; killed && c.ExitCode != 0 && c.Reason != "OOMKilled" {
			w.oomKilled[c.Id] = true
		}
	}
	for id := range w.messages {
		if !present[id] {
			delete(w.messages, id)
			delete(w.oomKilled, id)
		}
	}
	// A kill can be logged before the relist shows its container; one
	// whose container is gone for a minute is forgotten.
	w.mu.Lock()
	for id, at := range w.kernelOOM {
		if !present[id] && w.m.clock.Since(at) > time.Minute {
			delete(w.kernelOOM, id)
		}
	}
	w.mu.Unlock()
}

// noteKernelOOM records that the kernel OOM killer killed a process of
// container id (its log names the container's cgroup). containerd says
// OOMKilled only when its own OOM event beats the exit, which it can lose
// on a busy node, and on cgroup v1 the pod cgroup's counter does not count
// a kill at the container's own limit: the kernel's record settles it.
func (w *worker) noteKernelOOM(id, what, why string) {
	w.mu.Lock()
	if w.kernelOOM == nil {
		w.kernelOOM = map[string]time.Time{}
	}
	w.kernelOOM[id] = w.m.clock.Now()
	w.mu.Unlock()
	container, where := w.killedIn(id)
	w.event(container, corev1.EventTypeWarning, "OOMKilling", fmt.Sprintf("%s %s%s", what, where, why))
	w.wake()
}

// killedIn names where runtime ID id runs, for the OOM event: the
// container (its name, for the event's fieldPath too), the sandbox, or a
// container the last relist did not list yet (one killed as it started).
func (w *worker) killedIn(id string) (container, where string) {
	rt := w.m.cache.Get(w.uid)
	for _, c := range rt.GetContainers() {
		if c.GetId() == id {
			return c.GetMetadata().GetName(), "in container " + c.GetMetadata().GetName()
		}
	}
	for _, sb := range rt.GetSandboxes() {
		if sb.GetId() == id {
			return "", "in the pod's sandbox"
		}
	}
	return "", "in container " + shortID(id)
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
