package pods

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"nodeagent/agent/pleg"
)

// A terminal phase is published only once no container runs, as the
// kubelet's status manager holds it; a phase already terminal stays.
func TestHoldTerminalPhaseWhileAContainerRuns(t *testing.T) {
	sidecarUp := record("s", runtimeapi.ContainerState_CONTAINER_RUNNING, 0, "0", t0)
	sidecarDown := record("s", runtimeapi.ContainerState_CONTAINER_EXITED, 143, "0", t0)
	initFailed := record("i", runtimeapi.ContainerState_CONTAINER_EXITED, 1, "0", t0)
	pending := corev1.PodStatus{Phase: corev1.PodPending}
	for _, tc := range []struct {
		name     string
		previous corev1.PodStatus
		recs     []*runtimeapi.ContainerStatus
		want     corev1.PodPhase
	}{
		{"held while the sidecar runs", pending, []*runtimeapi.ContainerStatus{initFailed, sidecarUp}, corev1.PodPending},
		{"published once it stopped", pending, []*runtimeapi.ContainerStatus{initFailed, sidecarDown}, corev1.PodFailed},
		{"a first status is Pending, not empty", corev1.PodStatus{}, []*runtimeapi.ContainerStatus{sidecarUp}, corev1.PodPending},
		{"already terminal stays", corev1.PodStatus{Phase: corev1.PodFailed}, []*runtimeapi.ContainerStatus{sidecarUp}, corev1.PodFailed},
	} {
		st := corev1.PodStatus{Phase: corev1.PodFailed, Reason: "r", Message: "m"}
		holdTerminalPhase(&st, tc.previous, &pleg.PodRuntime{Containers: tc.recs})
		if st.Phase != tc.want {
			t.Errorf("%s: phase %s, want %s", tc.name, st.Phase, tc.want)
		}
		if st.Phase != corev1.PodFailed && (st.Reason != tc.previous.Reason || st.Message != tc.previous.Message) {
			t.Errorf("%s: reason %q message %q, want the previous ones", tc.name, st.Reason, st.Message)
		}
	}
	st := corev1.PodStatus{Phase: corev1.PodRunning}
	holdTerminalPhase(&st, pending, &pleg.PodRuntime{Containers: []*runtimeapi.ContainerStatus{sidecarUp}})
	if st.Phase != corev1.PodRunning {
		t.Errorf("a non-terminal phase changed to %s", st.Phase)
	}
}

// Every init and app container status carries started, false until it
// runs and its startup probe passed: clients dereference it.
func TestEveryContainerStatusSaysWhetherItStarted(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	pod := testPod(corev1.RestartPolicyAlways, "app")
	pod.Spec.InitContainers = []corev1.Container{{Name: "sidecar", Image: "img", RestartPolicy: &always}}
	pod.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debug"}}}
	st := podStatus(pod, &pleg.PodRuntime{}, nil) // nothing created yet
	for _, cs := range append(st.InitContainerStatuses, st.ContainerStatuses...) {
		if cs.Started == nil || *cs.Started {
			t.Errorf("%s (waiting): started %v, want false", cs.Name, cs.Started)
		}
	}
	if cs := st.EphemeralContainerStatuses[0]; cs.Started != nil {
		t.Errorf("ephemeral container: started %v, want none as the kubelet", *cs.Started)
	}
}
