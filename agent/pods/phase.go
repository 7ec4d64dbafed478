package pods

import (
	corev1 "k8s.io/api/core/v1"

	"nodeagent/internal/qos"
)

// A pod's phase, as the kubelet's getPhase, and the end states of a pod
// that stopped.

// podPhase is the kubelet's getPhase; stopped is its podIsTerminal, and
// initialized its HasAnyActiveRegularContainerStarted: an app container was
// created in the pod's current sandbox (after a node reboot the old
// sandbox's app containers do not make the re-initialization Running).
func podPhase(pod *corev1.Pod, initStatuses, statuses []corev1.ContainerStatus, podStopped, initialized bool) corev1.PodPhase {
	byName := func(list []corev1.ContainerStatus, name string) (corev1.ContainerStatus, bool) {
		for _, s := range list {
			if s.Name == name {
				return s, true
			}
		}
		return corev1.ContainerStatus{}, false
	}
	// failedInit and stoppedNotRestartable count what will not be started
	// again (containerShouldRestart: restart rules, then the container's
	// policy, then the pod's).
	pendingInit, pendingSidecars, failedInit := 0, 0, 0
	unknown, running, waiting, stopped, stoppedNotRestartable, succeeded := 0, 0, 0, 0, 0, 0
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		s, ok := byName(initStatuses, c.Name)
		if qos.IsSidecar(c) {
			// A running sidecar keeps the pod Running (so a pod whose app
			// containers are done turns Succeeded or Failed only once its
			// sidecars are stopped); a stopped one does not count.
			switch {
			case !ok:
				unknown++
			case s.State.Running != nil:
				if s.Started == nil || !*s.Started {
					pendingSidecars++
				}
				running++
			case s.State.Terminated != nil:
			case s.State.Waiting != nil:
				if s.LastTerminationState.Terminated == nil {
					pendingSidecars++
					waiting++
				}
			default:
				pendingSidecars++
				unknown++
			}
			continue
		}
		// A failed one restarting is not pending: the app containers wait.
		switch {
		case !ok:
			pendingInit++
		case s.State.Running != nil:
			pendingInit++
		case s.State.Terminated != nil:
			if t := s.State.Terminated; t.ExitCode != 0 && !restartable(pod, c, t) {
				failedInit++
			}
		case s.State.Waiting != nil:
			if t := s.LastTerminationState.Terminated; t == nil {
				pendingInit++
			} else if t.ExitCode != 0 && !restartable(pod, c, t) {
				failedInit++
			}
		default:
			pendingInit++
		}
	}
	for _, c := range pod.Spec.Containers {
		s, ok := byName(statuses, c.Name)
		if !ok {
			unknown++
			continue
		}
		switch {
		case s.State.Running != nil:
			running++
		case s.State.Terminated != nil:
			stopped++
			if s.State.Terminated.ExitCode == 0 {
				succeeded++
			}
			if !restartable(pod, &c, s.State.Terminated) {
				stoppedNotRestartable++
			}
		case s.State.Waiting != nil:
			if t := s.LastTerminationState.Terminated; t != nil {
				stopped++
				if !restartable(pod, &c, t) {
					stoppedNotRestartable++
				}
			} else {
				waiting++
			}
		default:
			unknown++
		}
	}
	if failedInit > 0 {
		return corev1.PodFailed
	}
	switch {
	case pendingInit > 0 || pendingSidecars > 0 && !initialized || waiting > 0:
		return corev1.PodPending
	case running > 0 && unknown == 0:
		return corev1.PodRunning
	case running == 0 && stopped > 0 && unknown == 0:
		if podStopped {
			if stopped == succeeded {
				return corev1.PodSucceeded
			}
			return corev1.PodFailed
		}
		if stopped != stoppedNotRestartable {
			return corev1.PodRunning
		}
		if stopped == succeeded {
			return corev1.PodSucceeded
		}
		return corev1.PodFailed
	}
	return corev1.PodPending
}

// unknownEnd is the end state the kubelet gives a container it found no
// end for when the pod was terminated.
var unknownEnd = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
	Reason: "ContainerStatusUnknown", Message: "The container could not be located when the pod was terminated", ExitCode: 137,
}}

// endStates completes the status of a deleted pod whose containers have
// stopped, as the kubelet's status manager does before the pod leaves the
// API (TerminatePod): once the pod has initialized, a container without an
// end state failed; so did each init container that tried to start; and the
// phase is terminal, Failed unless getPhase found it Succeeded.
func endStates(pod *corev1.Pod, st *corev1.PodStatus) {
	if podInitialized(pod, st) {
		for i := range st.ContainerStatuses {
			if st.ContainerStatuses[i].State.Terminated == nil {
				st.ContainerStatuses[i].State = *unknownEnd.DeepCopy()
			}
		}
	}
	// Init containers up to the last one that left waiting (at least the
	// first) have tried to start.
	tried := 0
	for i, cs := range st.InitContainerStatuses {
		if cs.State.Waiting == nil || cs.LastTerminationState.Terminated != nil {
			tried = i + 1
		}
	}
	tried = max(tried, min(1, len(st.InitContainerStatuses)))
	for i := range st.InitContainerStatuses[:tried] {
		if st.InitContainerStatuses[i].State.Terminated == nil {
			st.InitContainerStatuses[i].State = *unknownEnd.DeepCopy()
		}
	}
	if st.Phase != corev1.PodSucceeded {
		st.Phase = corev1.PodFailed
	}
}

// podInitialized is the kubelet's hasPodInitialized: no init containers, a
// regular container that left waiting, or a last init container that
// succeeded.
func podInitialized(pod *corev1.Pod, st *corev1.PodStatus) bool {
	if len(pod.Spec.InitContainers) == 0 {
		return true
	}
	for _, cs := range st.ContainerStatuses {
		if cs.LastTerminationState.Terminated != nil || cs.State.Waiting == nil {
			return true
		}
	}
	if n := len(st.InitContainerStatuses); n > 0 {
		last := st.InitContainerStatuses[n-1]
		for _, t := range []*corev1.ContainerStateTerminated{last.State.Terminated, last.LastTerminationState.Terminated} {
			if t != nil && t.ExitCode == 0 {
				return true
			}
		}
	}
	return false
}

// endedInSuccess: nothing runs and every app container exited 0.
func endedInSuccess(st *corev1.PodStatus) bool {
	for _, cs := range st.InitContainerStatuses {
		if cs.State.Running != nil {
			return false
		}
	}
	for _, cs := range st.ContainerStatuses {
		if t := cs.State.Terminated; t == nil || t.ExitCode != 0 {
			return false
		}
	}
	return len(st.ContainerStatuses) > 0
}
