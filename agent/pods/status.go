package pods

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"nodeagent/agent/pleg"
	"nodeagent/agent/pods/criconfig"
	"nodeagent/agent/source"
	"nodeagent/cgroups"
	"nodeagent/cri"
	"nodeagent/internal/qos"
)

// waitingReason is why a container is not running, as the worker last saw
// it (ErrImagePull, CrashLoopBackOff, CreateContainerError, ...).
type waitingReason struct {
	Reason, Message string
}

// terminalReason is why the agent itself ended a pod.
type terminalReason struct {
	Reason, Message string
	// Disruption is the DisruptionTarget condition's message ("": none).
	Disruption string
	// ByExits: the node stopped the pod (eviction, preemption, shutdown),
	// so once nothing runs its phase follows the exits, as the kubelet's
	// getPhase of a terminal pod: Succeeded, without the reason, when
	// every container exited 0 (not for static pods, kubernetes#116484).
	ByExits bool
}

// statusInput is everything a pod's status is computed from.
type statusInput struct {
	pod       *corev1.Pod
	rt        *pleg.PodRuntime
	waiting   map[string]waitingReason
	messages  map[string]string // termination messages by container ID
	oomKilled map[string]bool   // containers the memory cgroup showed OOM killed
	terminal  *terminalReason   // set: the pod is Failed with this reason
	// stopped: a deleted API pod whose containers have all stopped (the
	// kubelet's podIsTerminal): its phase turns terminal.
	stopped     bool
	previous    corev1.PodStatus
	hostIP      string
	runtimeName string // containerID scheme, e.g. "containerd"
	startTime   metav1.Time
	now         time.Time
	// probes answers readiness and startup results; nil: every running
	// container is started and ready.
	probes Probes
	// rro: the runtime makes read-only mounts recursively so, as the
	// containers' volumeMounts statuses say.
	rro bool
	// resets are the containers a RestartAllContainers reset removed;
	// resetting: one is under way.
	resets    map[string]resetRecord
	resetting bool
	// devices is the health of the devices each container holds.
	devices map[string][]corev1.ResourceStatus
	resize  []corev1.PodCondition // PodResizePending and PodResizeInProgress, with their generations
	// podCgroup reads the pod cgroup's values (nil, or returning nil: no
	// pod cgroups); only a running pod's status reads them.
	podCgroup func() *cgroups.ResourceConfig
}

// initStatusLost is the kubelet's word for an init container whose record
// is gone from the runtime (removed by hand, or a static pod's status lost
// in a restart) after the app containers were created.
const initStatusLost = "Unable to get init container status from container runtime and pod has been initialized, treat it as exited normally"

// initRecordLost reports whether a (non-sidecar) init container has no
// record left while an app container was created: it completed, as the
// kubelet infers (generateAPIPodStatus, HasAnyRegularContainerCreated).
func initRecordLost(pod *corev1.Pod, c *corev1.Container, rt *pleg.PodRuntime) bool {
	if qos.IsSidecar(c) || len(rt.ContainersNamed(c.Name)) > 0 {
		return false
	}
	for i := range pod.Spec.Containers {
		for _, r := range rt.ContainersNamed(pod.Spec.Containers[i].Name) {
			if r.State != runtimeapi.ContainerState_CONTAINER_UNKNOWN {
				return true
			}
		}
	}
	return false
}

// appCreatedInSandbox reports whether an app container was created in the
// pod's current, ready sandbox (the kubelet's active containers).
func appCreatedInSandbox(pod *corev1.Pod, rt *pleg.PodRuntime) bool {
	sb := rt.LatestSandbox()
	if sb == nil || sb.State != runtimeapi.PodSandboxState_SANDBOX_READY {
		return false
	}
	for _, c := range rt.GetContainers() {
		if isAppContainer(pod, c.GetMetadata().GetName()) && c.CreatedAt >= sb.CreatedAt {
			return true
		}
	}
	return false
}

// computeStatus derives the pod's corev1.PodStatus from its spec and what
// the runtime holds, with the kubelet's phase rules, conditions and
// container states.
func computeStatus(in statusInput) corev1.PodStatus {
	pod := in.pod
	st := corev1.PodStatus{
		QOSClass:  qos.Class(pod),
		HostIP:    in.hostIP,
		StartTime: &in.startTime,
	}
	if in.hostIP != "" {
		st.HostIPs = []corev1.HostIP{{IP: in.hostIP}}
	}
	sandbox := in.rt.LatestSandbox()
	sandboxReady := sandbox != nil && sandbox.State == runtimeapi.PodSandboxState_SANDBOX_READY
	if sandboxReady && sandbox.Network != nil && sandbox.Network.Ip != "" {
		st.PodIP = sandbox.Network.Ip
		st.PodIPs = []corev1.PodIP{{IP: sandbox.Network.Ip}}
		for _, ip := range sandbox.Network.AdditionalIps {
			st.PodIPs = append(st.PodIPs, corev1.PodIP{IP: ip.Ip})
		}
	}
	if pod.Spec.HostNetwork && sandboxReady {
		st.PodIP, st.PodIPs = in.hostIP, []corev1.PodIP{{IP: in.hostIP}}
	}

	initDone := true
	var incompleteInit []string
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		cs := in.containerStatus(c, "PodInitializing")
		if cs.State.Waiting != nil && initRecordLost(pod, c, in.rt) {
			cs.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Completed", Message: initStatusLost}}
		}
		markStarted(&cs)
		// A finished init container is ready (the kubelet's prober
		// manager says so for exit 0).
		if t := cs.State.Terminated; t != nil && t.ExitCode == 0 && !qos.IsSidecar(c) {
			cs.Ready = true
		}
		st.InitContainerStatuses = append(st.InitContainerStatuses, cs)
		done := (cs.State.Terminated != nil && cs.State.Terminated.ExitCode == 0) ||
			(qos.IsSidecar(c) && cs.State.Running != nil)
		if !done {
			initDone = false
			incompleteInit = append(incompleteInit, c.Name)
		}
	}
	defaultWaiting := "ContainerCreating"
	if !initDone {
		defaultWaiting = "PodInitializing"
	}
	for i := range pod.Spec.Containers {
		cs := in.containerStatus(&pod.Spec.Containers[i], defaultWaiting)
		markStarted(&cs)
		// App containers only, as the kubelet.
		cs.AllocatedResourcesStatus = in.devices[cs.Name]
		st.ContainerStatuses = append(st.ContainerStatuses, cs)
	}
	for i := range pod.Spec.EphemeralContainers {
		c := (*corev1.Container)(&pod.Spec.EphemeralContainers[i].EphemeralContainerCommon)
		st.EphemeralContainerStatuses = append(st.EphemeralContainerStatuses, in.containerStatus(c, "ContainerCreating"))
	}
	st.Phase = podPhase(pod, st.InitContainerStatuses, st.ContainerStatuses, in.stopped, appCreatedInSandbox(pod, in.rt))
	if in.stopped {
		endStates(pod, &st)
	}
	if t := in.terminal; t != nil {
		switch {
		case t.ByExits && terminalPhase(in.previous.Phase):
			st.Phase, st.Reason, st.Message = in.previous.Phase, in.previous.Reason, in.previous.Message // decided once
		case t.ByExits && source.FromAPI(pod) && endedInSuccess(&st):
			st.Phase, st.Reason, st.Message = corev1.PodSucceeded, "", ""
		default:
			st.Phase, st.Reason, st.Message = corev1.PodFailed, t.Reason, t.Message
		}
	}
	// No way out of a terminal phase, as the kubelet forces it back: a
	// finished pod's records can go, and its worker must not start it again.
	if terminalPhase(in.previous.Phase) {
		st.Phase = in.previous.Phase
	}
	// A pod that ended keeps the IP it had, its sandbox stopped or not, as
	// the kubelet's terminal status does.
	if st.PodIP == "" && (in.stopped || st.Phase == corev1.PodSucceeded || st.Phase == corev1.PodFailed) {
		st.PodIP, st.PodIPs = in.previous.PodIP, in.previous.PodIPs
	}

	cond := func(t corev1.PodConditionType, ok bool, reason, message string) {
		setCondition(&st, in.previous.Conditions, in.now, t, ok, reason, message)
	}
	why := sandboxNotReady(pod, in.rt)
	cond(corev1.PodReadyToStartContainers, why == "", "PodSandboxNotReady", why)
	cond(corev1.PodInitialized, initDone, "ContainersNotInitialized", fmt.Sprintf("containers with incomplete status: [%s]", strings.Join(incompleteInit, " ")))
	setReadyConditions(pod, &st, in.previous.Conditions, in.now)
	cond(corev1.PodScheduled, true, "", "")
	restartingCondition(pod, &st, in.resetting, in.previous.Conditions, in.now)
	if in.terminal != nil && in.terminal.Disruption != "" {
		setCondition(&st, in.previous.Conditions, in.now, corev1.DisruptionTarget, true, "", "")
		c := &st.Conditions[len(st.Conditions)-1]
		c.Reason, c.Message = corev1.PodReasonTerminationByKubelet, in.terminal.Disruption
	}
	observeGeneration(pod, &st, in.previous.ObservedGeneration)
	if !terminalPhase(st.Phase) {
		st.Conditions = append(st.Conditions, in.resize...)
	}
	podLevelStatus(pod, &st, in.podCgroup)
	return st
}

// refreshReadiness re-reads readiness and startup results for the running
// containers of a published status and updates its ready conditions.
func refreshReadiness(pod *corev1.Pod, probes Probes, now time.Time) {
	update := func(statuses []corev1.ContainerStatus) {
		for i := range statuses {
			cs := &statuses[i]
			if cs.State.Running == nil {
				continue
			}
			id := containerIDOf(cs.ContainerID)
			started := probes.Started(pod.UID, cs.Name, id)
			cs.Started = &started
			cs.Ready = started && probes.Ready(pod.UID, cs.Name, id)
		}
	}
	update(pod.Status.InitContainerStatuses)
	update(pod.Status.ContainerStatuses)
	previous := append([]corev1.PodCondition(nil), pod.Status.Conditions...)
	setReadyConditions(pod, &pod.Status, previous, now)
	observeGeneration(pod, &pod.Status, pod.Status.ObservedGeneration)
}

// containerIDOf strips the runtime scheme from a status containerID.
func containerIDOf(s string) string {
	if _, id, ok := strings.Cut(s, "://"); ok {
		return id
	}
	return s
}

// containerStatus is the status of one container from its newest runtime
// records: the newest decides the state, the one before is lastState. An
// exited container the worker is about to restart shows as waiting with
// the worker's reason and its exit as lastState, as in the kubelet.
func (in statusInput) containerStatus(c *corev1.Container, defaultWaiting string) corev1.ContainerStatus {
	cs := corev1.ContainerStatus{Name: c.Name, Image: c.Image, VolumeMounts: criconfig.VolumeMountStatuses(c, in.rro)}
	recs := in.rt.ContainersNamed(c.Name)
	waiting := func() *corev1.ContainerStateWaiting {
		if w, ok := in.waiting[c.Name]; ok {
			return &corev1.ContainerStateWaiting{Reason: w.Reason, Message: w.Message}
		}
		return &corev1.ContainerStateWaiting{Reason: defaultWaiting}
	}
	reset, wasReset := in.resets[c.Name]
	if len(recs) == 0 && !wasReset {
		// A finished container's records can go (the reclaim before a
		// disk eviction takes a finished pod's): its last status stands,
		// as the kubelet keeps an old terminated status.
		if old := in.previousStatus(c.Name); old != nil && old.State.Terminated != nil {
			return *old.DeepCopy()
		}
	}
	if len(recs) == 0 {
		cs.State.Waiting = waiting()
		if wasReset {
			cs.RestartCount, cs.LastTerminationState.Terminated = reset.restartCount+1, reset.last
			if _, own := in.waiting[c.Name]; !own && in.resetting {
				cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: reasonRestartingAll, Message: messageRestartingAll}
			}
		}
		return cs
	}
	latest := recs[0]
	// What it was allocated, and what the runtime says it holds (the
	// API server refuses a resize of a running container without them).
	if len(c.Resources.Requests) > 0 {
		cs.AllocatedResources = c.Resources.Requests.DeepCopy()
	}
	cs.Resources = statusResources(c.Resources, latest)
	// The image the container runs, as the kubelet reports it: after an
	// image update, a container not yet replaced still runs the old one.
	if img := latest.Annotations[cri.AnnotationContainerImageRequest]; img != "" {
		cs.Image = img
	}
	cs.ContainerID = in.runtimeName + "://" + latest.Id
	cs.ImageID = latest.ImageRef
	// The identity the runtime gave the process (1.35's status.user).
	if u := latest.GetUser().GetLinux(); u != nil {
		cs.User = &corev1.ContainerUser{Linux: &corev1.LinuxContainerUser{UID: u.Uid, GID: u.Gid, SupplementalGroups: u.SupplementalGroups}}
	}
	if n, err := strconv.Atoi(latest.Annotations[cri.AnnotationRestartCount]); err == nil {
		cs.RestartCount = int32(n)
	}
	var previous *corev1.ContainerStateTerminated
	if len(recs) > 1 && recs[1].State == runtimeapi.ContainerState_CONTAINER_EXITED {
		previous = in.terminated(recs[1])
	} else if len(recs) == 1 && wasReset {
		previous = reset.last // the one before was removed by the reset
	} else if old := in.previousStatus(c.Name); len(recs) == 1 && old != nil && old.ContainerID == cs.ContainerID && old.LastTerminationState.Terminated != nil {
		// The record before was removed (a finished pod's, oldest
		// first): the exit the status showed stands as lastState.
		previous = old.LastTerminationState.Terminated.DeepCopy()
	}
	switch latest.State {
	case runtimeapi.ContainerState_CONTAINER_RUNNING:
		cs.State.Running = &corev1.ContainerStateRunning{StartedAt: nanoTime(latest.StartedAt)}
		started, ready := true, true
		if in.probes != nil {
			started = in.probes.Started(in.pod.UID, c.Name, latest.Id)
			ready = started && in.probes.Ready(in.pod.UID, c.Name, latest.Id)
		}
		cs.Started = &started
		cs.Ready = ready
		if previous != nil {
			cs.LastTerminationState.Terminated = previous
		}
	case runtimeapi.ContainerState_CONTAINER_EXITED:
		term := in.terminated(latest)
		if _, restarting := in.waiting[c.Name]; restarting {
			cs.State.Waiting = waiting()
			cs.LastTerminationState.Terminated = term
		} else {
			cs.State.Terminated = term
			if previous != nil {
				cs.LastTerminationState.Terminated = previous
			}
		}
		started := false
		cs.Started = &started
	default: // created or unknown
		cs.State.Waiting = waiting()
		if previous != nil {
			cs.LastTerminationState.Terminated = previous
		}
	}
	return cs
}

// previousStatus is the container's status as last published, nil when
// there was none.
func (in statusInput) previousStatus(name string) *corev1.ContainerStatus {
	for _, l := range [][]corev1.ContainerStatus{in.previous.InitContainerStatuses, in.previous.ContainerStatuses, in.previous.EphemeralContainerStatuses} {
		for i := range l {
			if l[i].Name == name {
				return &l[i]
			}
		}
	}
	return nil
}

// markStarted gives a container that has not run its started: false, as
// the kubelet's prober sets it on every init and app container (clients
// read it without a nil check); ephemeral containers keep none.
func markStarted(cs *corev1.ContainerStatus) {
	if cs.Started == nil {
		started := false
		cs.Started = &started
	}
}

func (in statusInput) terminated(rec *runtimeapi.ContainerStatus) *corev1.ContainerStateTerminated {
	reason := rec.Reason
	if in.oomKilled[rec.Id] {
		reason = "OOMKilled"
	}
	if reason == "" {
		reason = "Error"
		if rec.ExitCode == 0 {
			reason = "Completed"
		}
	}
	return &corev1.ContainerStateTerminated{
		ExitCode:    rec.ExitCode,
		Reason:      reason,
		Message:     joinMessage(rec.Message, in.messages[rec.Id]),
		StartedAt:   nanoTime(rec.StartedAt),
		FinishedAt:  nanoTime(rec.FinishedAt),
		ContainerID: in.runtimeName + "://" + rec.Id,
	}
}

func nanoTime(ns int64) metav1.Time {
	if ns == 0 {
		return metav1.Time{}
	}
	return metav1.NewTime(time.Unix(0, ns))
}
