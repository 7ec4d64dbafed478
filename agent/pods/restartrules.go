package pods

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// containerShouldRestart is the kubelet's ContainerShouldRestart (1.35's
// container restart rules): the first of the container's rules that
// matches the exit code decides (Restart restarts); else the container's
// own restartPolicy; else the pod's.
func containerShouldRestart(pod *corev1.Pod, c *corev1.Container, exitCode int32) bool {
	if c.RestartPolicy != nil {
		// RestartAllContainers restarts it too, with the whole pod.
		if _, ok := matchingRestartRule(c, exitCode); ok {
			return true
		}
		switch *c.RestartPolicy {
		case corev1.ContainerRestartPolicyAlways:
			return true
		case corev1.ContainerRestartPolicyOnFailure:
			return exitCode != 0
		case corev1.ContainerRestartPolicyNever:
			return false
		}
	}
	switch pod.Spec.RestartPolicy {
	case corev1.RestartPolicyNever:
		return false
	case corev1.RestartPolicyOnFailure:
		return exitCode != 0
	}
	return true
}

// matchingRestartRule is the first rule whose exit codes match.
func matchingRestartRule(c *corev1.Container, exitCode int32) (corev1.ContainerRestartRule, bool) {
	for _, r := range c.RestartPolicyRules {
		e := r.ExitCodes
		if e == nil {
			continue
		}
		in := slices.Contains(e.Values, exitCode)
		if (e.Operator == corev1.ContainerRestartRuleOnExitCodesOpIn && in) || (e.Operator == corev1.ContainerRestartRuleOnExitCodesOpNotIn && !in) {
			return r, true
		}
	}
	return corev1.ContainerRestartRule{}, false
}

// restartsOnProbeFailure: a container killed by its liveness or startup
// probe is started again unless its restartPolicy (else the pod's) is
// Never; rules are not asked, the container has no exit code of its own.
func restartsOnProbeFailure(pod *corev1.Pod, c *corev1.Container) bool {
	if c.RestartPolicy != nil {
		return *c.RestartPolicy != corev1.ContainerRestartPolicyNever
	}
	return pod.Spec.RestartPolicy != corev1.RestartPolicyNever
}
