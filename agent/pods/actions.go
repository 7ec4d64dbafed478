package pods

import (
	"math"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"nodeagent/agent/pleg"
	"nodeagent/cri"
	"nodeagent/internal/qos"
	"nodeagent/probes"
)

// podActions is what one sync of a pod does, decided from what is known
// before it acts: the kubelet's computePodActions. The worker's executor
// carries it out (sync.go, start.go); the back-off of restarts and image
// pulls is the executor's, as in the kubelet's SyncPod.
type podActions struct {
	// killPod: the pod is over (ended by the agent, or its app containers
	// are done); what runs stops and nothing starts.
	killPod bool
	sandbox sandboxStep
	// containers are the steps in order: init containers up to the first
	// that is not done, then, once the init containers are done (or an
	// app container ran in this sandbox), every app container, then the
	// ephemeral containers never started.
	containers []containerAction
	// initPending: an init container is not done; the app containers wait.
	initPending bool
	// resetAll: a RestartAllContainers rule matched; these records are
	// stopped and removed, and nothing else happens in this sync.
	resetAll []resetStep
}

// sandboxStep is what happens to the pod's sandbox.
type sandboxStep int

const (
	sandboxKeep sandboxStep = iota // ready, with its network
	// sandboxCreate: none is ready; what is left of the old one is stopped
	// and a new one runs, with the next attempt number.
	sandboxCreate
	// sandboxNeverAgain: restartPolicy Never and containers ran; the
	// kubelet does not re-create such a sandbox, and neither is anything
	// started in it.
	sandboxNeverAgain
)

// containerStep is what happens to one container.
type containerStep int

const (
	// keep: running as it should, or done for good (an init container
	// that exited 0, a container the restart policy leaves exited).
	keepAsIs         containerStep = iota
	startNew                       // never started in this sandbox
	restartExited                  // exited; the restart policy starts it again (after its back-off)
	restartUnhealthy               // a liveness or startup probe failed: killed, then started again (after its back-off)
	killUnhealthy                  // a probe failed under restartPolicy Never: killed, not started again
	replaceChanged                 // its image changed: killed and started again at once, whatever the policy
	replaceResized                 // resized in a resource its resizePolicy restarts for: likewise
	startCreated                   // created but never started (the agent stopped in between): that one is started
	replaceCutOff                  // an earlier agent's start was cut off before it ran: removed and started again, the restart not counted
	replaceUnknown                 // in an unknown state: removed and started again
)

var containerStepNames = [...]string{"keep", "start", "restartExited", "restartUnhealthy", "killUnhealthy", "replaceChanged", "replaceResized", "startCreated", "replaceCutOff", "replaceUnknown"}

func (s containerStep) String() string { return containerStepNames[s] }

// containerAction is one container's step.
type containerAction struct {
	step      containerStep
	container *corev1.Container
	init      bool                        // an init container (a sidecar if restartable)
	current   *runtimeapi.ContainerStatus // its record in the pod's sandbox, nil if none
	// restartCount is the one the started container gets.
	restartCount int32
	// exitedAt is when it ended (restartExited), where its back-off counts
	// from.
	exitedAt time.Time
	// probe is the probe that failed, and the grace it asks for
	// (restartUnhealthy, killUnhealthy).
	probe      probes.Kind
	probeGrace *int64
}

// probeResults are the probe results the actions are decided on.
type probeResults interface {
	// Started: the container's startup probe passed (or it has none).
	Started(uid types.UID, container, id string) bool
	// Kill: a liveness or startup probe failed and the container must be
	// killed, with the probe's grace when set.
	Kill(uid types.UID, container, id string) (kind probes.Kind, grace *int64, kill bool)
}

// podState is everything computePodActions reads.
type podState struct {
	pod *corev1.Pod
	rt  *pleg.PodRuntime
	// terminal: the pod is over (see worker.terminal).
	terminal bool
	// born is when this agent's worker started: a container created
	// before and never started had its start cut off by an earlier agent.
	born   time.Time
	probes probeResults
	// probeKilled are the container IDs a probe had killed, by name:
	// restarted whatever their exit code.
	probeKilled map[string]string
	// removedRestarts is the restart count of a container whose records
	// are gone (a static pod removed and added again).
	removedRestarts func(container string) (int32, bool)
	// resizeRestart reports whether a running container was resized in a
	// resource its resizePolicy restarts it for (nil: never).
	resizeRestart func(c *corev1.Container, rec *runtimeapi.ContainerStatus) bool
}

// computePodActions decides one sync: the pod's sandbox, then its
// containers, as the kubelet's computePodActions does.
func computePodActions(s podState) podActions {
	if s.terminal {
		return podActions{killPod: true}
	}
	pod, rt := s.pod, s.rt
	var a podActions
	sb := rt.LatestSandbox()
	sandboxCreated := int64(math.MaxInt64) // a new sandbox holds no container yet
	switch {
	case !needsSandbox(pod, sb):
		a.sandbox, sandboxCreated = sandboxKeep, sb.CreatedAt
	case sb != nil && pod.Spec.RestartPolicy == corev1.RestartPolicyNever && len(rt.GetContainers()) > 0:
		a.sandbox = sandboxNeverAgain
		return a
	default:
		a.sandbox = sandboxCreate
	}
	if a.sandbox == sandboxKeep {
		if a.resetAll = s.resetSteps(sandboxCreated); a.resetAll != nil {
			return a
		}
	}
	appStarted := false
	for _, c := range rt.GetContainers() {
		if isAppContainer(pod, c.GetMetadata().GetName()) && c.CreatedAt >= sandboxCreated {
			appStarted = true
		}
	}
	if !appStarted {
		for i := range pod.Spec.InitContainers {
			c, done := s.container(&pod.Spec.InitContainers[i], true, sandboxCreated)
			a.containers = append(a.containers, c)
			if !done {
				a.initPending = true
				return a
			}
		}
	} else {
		// Once the pod runs, its sidecars are still looked after, as the
		// kubelet's computeInitContainerActions does: restarted when they
		// exit or fail their probes, replaced when their image changes.
		for i := range pod.Spec.InitContainers {
			if c := &pod.Spec.InitContainers[i]; qos.IsSidecar(c) {
				act, _ := s.container(c, true, sandboxCreated)
				a.containers = append(a.containers, act)
			}
		}
	}
	for i := range pod.Spec.Containers {
		c, _ := s.container(&pod.Spec.Containers[i], false, sandboxCreated)
		a.containers = append(a.containers, c)
	}
	// Ephemeral containers (kubectl debug) run once each, never restarted.
	for i := range pod.Spec.EphemeralContainers {
		c := (*corev1.Container)(&pod.Spec.EphemeralContainers[i].EphemeralContainerCommon)
		if len(rt.ContainersNamed(c.Name)) == 0 {
			a.containers = append(a.containers, containerAction{step: startNew, container: c})
		}
	}
	return a
}

// container decides one container's step in a sandbox created at
// sandboxCreated, and whether it is done in the init sense (exited 0, or
// for a sidecar, running and started).
func (s podState) container(c *corev1.Container, init bool, sandboxCreated int64) (containerAction, bool) {
	a := containerAction{container: c, init: init}
	if recs := s.rt.ContainersNamed(c.Name); len(recs) > 0 {
		if n, err := strconv.Atoi(recs[0].Annotations[cri.AnnotationRestartCount]); err == nil {
			a.restartCount = int32(n) + 1
		}
		if recs[0].CreatedAt >= sandboxCreated {
			a.current = recs[0]
		}
	} else if s.removedRestarts != nil {
		if n, ok := s.removedRestarts(c.Name); ok {
			a.restartCount = n + 1
		}
	}
	current := a.current
	if current == nil {
		a.step = startNew
		return a, false
	}
	pod := s.pod
	sidecar := init && qos.IsSidecar(c)
	switch current.State {
	case runtimeapi.ContainerState_CONTAINER_RUNNING:
		if kind, grace, kill := s.probes.Kill(pod.UID, c.Name, current.Id); kill {
			a.probe, a.probeGrace = kind, grace
			a.step = restartUnhealthy
			if !sidecar && !restartsOnProbeFailure(pod, c) {
				a.step = killUnhealthy
			}
			return a, false
		}
		// An app container or a sidecar whose image changed is replaced
		// (the API server lets only those change theirs).
		if (!init || sidecar) && current.Annotations[cri.AnnotationContainerImageRequest] != c.Image {
			a.step = replaceChanged
			return a, false
		}
		if (!init || sidecar) && s.resizeRestart != nil && s.resizeRestart(c, current) {
			a.step = replaceResized
			return a, false
		}
		if sidecar {
			// The containers after a sidecar start once it has started:
			// running, and its startup probe passed (KEP-753).
			return a, s.probes.Started(pod.UID, c.Name, current.Id)
		}
		return a, !init
	case runtimeapi.ContainerState_CONTAINER_EXITED:
		if current.StartedAt == 0 && current.CreatedAt < s.born.UnixNano() {
			a.step = replaceCutOff
			a.restartCount--
			return a, false
		}
		if init && !sidecar && current.ExitCode == 0 {
			return a, true
		}
		if s.probeKilled[c.Name] != current.Id && !shouldRestart(pod, c, init, current.ExitCode) {
			return a, false
		}
		a.step, a.exitedAt = restartExited, time.Unix(0, current.FinishedAt)
		return a, false
	case runtimeapi.ContainerState_CONTAINER_CREATED:
		a.step = startCreated
		return a, false
	}
	a.step = replaceUnknown
	return a, false
}
