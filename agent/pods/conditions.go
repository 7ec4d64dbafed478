package pods

// The pod conditions the node owns.

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"nodeagent/agent/pleg"
	"nodeagent/internal/qos"
)

// setCondition sets (or adds) a condition, keeping its transition time
// while its status stays the same.
func setCondition(st *corev1.PodStatus, previous []corev1.PodCondition, now time.Time, t corev1.PodConditionType, ok bool, reason, message string) {
	c := corev1.PodCondition{Type: t, Status: corev1.ConditionFalse, Reason: reason, Message: message}
	if ok {
		c.Status, c.Reason, c.Message = corev1.ConditionTrue, "", ""
	}
	c.LastTransitionTime = metav1.NewTime(now)
	for _, old := range previous {
		if old.Type == t && old.Status == c.Status {
			c.LastTransitionTime = old.LastTransitionTime
		}
	}
	for i := range st.Conditions {
		if st.Conditions[i].Type == t {
			st.Conditions[i] = c
			return
		}
	}
	st.Conditions = append(st.Conditions, c)
}

// setReadyConditions derives ContainersReady and Ready from the
// containers' readiness, sidecars included, as the kubelet does.
func setReadyConditions(pod *corev1.Pod, st *corev1.PodStatus, previous []corev1.PodCondition, now time.Time) {
	var unready []string
	for i, cs := range st.InitContainerStatuses {
		if i < len(pod.Spec.InitContainers) && qos.IsSidecar(&pod.Spec.InitContainers[i]) && !cs.Ready {
			unready = append(unready, cs.Name)
		}
	}
	for _, cs := range st.ContainerStatuses {
		if !cs.Ready {
			unready = append(unready, cs.Name)
		}
	}
	reason, message := "ContainersNotReady", fmt.Sprintf("containers with unready status: [%s]", strings.Join(unready, " "))
	if st.Phase == corev1.PodSucceeded || st.Phase == corev1.PodFailed {
		reason, message = "PodCompleted", ""
	}
	ready := len(unready) == 0 && st.Phase == corev1.PodRunning
	setCondition(st, previous, now, corev1.ContainersReady, ready, reason, message)
	setCondition(st, previous, now, corev1.PodReady, ready, reason, message)
}

// sandboxNotReady says why the pod has no sandbox its containers can start
// in, in the kubelet's words (PodSandboxChanged); "" when it has one.
func sandboxNotReady(pod *corev1.Pod, rt *pleg.PodRuntime) string {
	sandboxes := rt.GetSandboxes()
	if len(sandboxes) == 0 {
		return "no pod sandbox exists"
	}
	ready := 0
	for _, sb := range sandboxes {
		if sb.State == runtimeapi.PodSandboxState_SANDBOX_READY {
			ready++
		}
	}
	latest := sandboxes[0]
	wantMode := runtimeapi.NamespaceMode_POD
	if pod.Spec.HostNetwork {
		wantMode = runtimeapi.NamespaceMode_NODE
	}
	switch {
	case ready > 1:
		return "multiple pod sandboxes are ready and need to be reconciled"
	case latest.State != runtimeapi.PodSandboxState_SANDBOX_READY:
		return "pod sandbox is not ready"
	case latest.GetLinux().GetNamespaces().GetOptions() != nil && latest.GetLinux().GetNamespaces().GetOptions().GetNetwork() != wantMode:
		return "network namespace mode changed and sandbox needs to be recreated"
	case !pod.Spec.HostNetwork && latest.Network != nil && latest.Network.Ip == "":
		return "pod sandbox has no IP address"
	}
	return ""
}

// observeGeneration stamps the status and the conditions the node owns
// with the generation of the spec they were computed from, as the kubelet
// does since 1.35; the status's never goes back.
func observeGeneration(pod *corev1.Pod, st *corev1.PodStatus, previous int64) {
	st.ObservedGeneration = max(pod.Generation, previous)
	for i := range st.Conditions {
		// The kubelet leaves AllContainersRestarting without one.
		if st.Conditions[i].Type != corev1.AllContainersRestarting {
			st.Conditions[i].ObservedGeneration = pod.Generation
		}
	}
}
