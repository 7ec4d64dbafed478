package pods

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"nodeagent/agent/pleg"
)

// scriptedProbes answers readiness and startup per container ID.
type scriptedProbes struct {
	noProbes
	ready, started map[string]bool
}

func (s scriptedProbes) Ready(_ types.UID, _, id string) bool   { return s.ready[id] }
func (s scriptedProbes) Started(_ types.UID, _, id string) bool { return s.started[id] }

func TestStatusUsesProbeResults(t *testing.T) {
	pod := testPod(corev1.RestartPolicyAlways, "a", "b")
	rt := &pleg.PodRuntime{Sandboxes: []*runtimeapi.PodSandboxStatus{readySandbox()}, Containers: []*runtimeapi.ContainerStatus{
		record("a", runtimeapi.ContainerState_CONTAINER_RUNNING, 0, "0", t0),
		record("b", runtimeapi.ContainerState_CONTAINER_RUNNING, 0, "0", t0),
	}}
	pr := scriptedProbes{ready: map[string]bool{"a-0": true, "b-0": true}, started: map[string]bool{"a-0": true}}
	st := computeStatus(statusInput{pod: pod, rt: rt, now: t0, probes: pr})
	a, b := st.ContainerStatuses[0], st.ContainerStatuses[1]
	if !a.Ready || !*a.Started {
		t.Errorf("a: ready %v started %v, want both", a.Ready, *a.Started)
	}
	// b's startup probe has not succeeded: not started, so not ready either.
	if b.Ready || *b.Started {
		t.Errorf("b: ready %v started %v, want neither", b.Ready, *b.Started)
	}
	ready := condition(st, corev1.PodReady)
	if ready.Status != corev1.ConditionFalse || ready.Message != "containers with unready status: [b]" {
		t.Errorf("Ready condition %+v", ready)
	}

	// A readiness change is applied to the stored status in place.
	p := pod.DeepCopy()
	p.Status = st
	pr.started["b-0"] = true
	refreshReadiness(p, pr, t0)
	if !p.Status.ContainerStatuses[1].Ready || condition(p.Status, corev1.PodReady).Status != corev1.ConditionTrue {
		t.Errorf("after startup and readiness: %+v", p.Status.Conditions)
	}
	pr.ready["a-0"] = false
	refreshReadiness(p, pr, t0)
	if c := condition(p.Status, corev1.ContainersReady); c.Status != corev1.ConditionFalse || !strings.Contains(c.Message, "[a]") {
		t.Errorf("after a readiness failure: %+v", c)
	}
}

func condition(st corev1.PodStatus, t corev1.PodConditionType) corev1.PodCondition {
	for _, c := range st.Conditions {
		if c.Type == t {
			return c
		}
	}
	return corev1.PodCondition{}
}
