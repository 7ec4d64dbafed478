package pods

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"nodeagent/agent/pleg"
)

func conditionOf(st corev1.PodStatus, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range st.Conditions {
		if st.Conditions[i].Type == t {
			return &st.Conditions[i]
		}
	}
	return nil
}

// PodReadyToStartContainers is False with the kubelet's reason and
// messages (PodSandboxChanged) whenever a new sandbox is needed.
func TestReadyToStartContainersSaysWhyNot(t *testing.T) {
	notReady := readySandbox()
	notReady.State = runtimeapi.PodSandboxState_SANDBOX_NOTREADY
	noIP := readySandbox()
	noIP.Network.Ip = ""
	hostMode := readySandbox()
	hostMode.Linux = &runtimeapi.LinuxPodSandboxStatus{Namespaces: &runtimeapi.Namespace{Options: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_NODE}}}
	second := readySandbox()
	second.Id = "sb2"
	for _, tc := range []struct {
		name      string
		sandboxes []*runtimeapi.PodSandboxStatus
		want      string // "" : True
	}{
		{"ready", []*runtimeapi.PodSandboxStatus{readySandbox()}, ""},
		{"none", nil, "no pod sandbox exists"},
		{"two ready", []*runtimeapi.PodSandboxStatus{readySandbox(), second}, "multiple pod sandboxes are ready and need to be reconciled"},
		{"latest not ready", []*runtimeapi.PodSandboxStatus{notReady, readySandbox()}, "pod sandbox is not ready"},
		{"host network namespace for a pod network", []*runtimeapi.PodSandboxStatus{hostMode}, "network namespace mode changed and sandbox needs to be recreated"},
		{"no IP", []*runtimeapi.PodSandboxStatus{noIP}, "pod sandbox has no IP address"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := podStatus(testPod(corev1.RestartPolicyAlways, "app"), &pleg.PodRuntime{Sandboxes: tc.sandboxes}, nil)
			c := conditionOf(st, corev1.PodReadyToStartContainers)
			switch {
			case c == nil:
				t.Fatal("no PodReadyToStartContainers condition")
			case tc.want == "" && (c.Status != corev1.ConditionTrue || c.Reason != ""):
				t.Errorf("want True without a reason, got %+v", c)
			case tc.want != "" && (c.Status != corev1.ConditionFalse || c.Reason != "PodSandboxNotReady" || c.Message != tc.want):
				t.Errorf("want False, PodSandboxNotReady, %q; got %+v", tc.want, c)
			}
		})
	}
}

// The status and every condition carry the generation of the spec they
// were computed from; the status's never goes back.
func TestStatusObservesTheGeneration(t *testing.T) {
	pod := testPod(corev1.RestartPolicyAlways, "app")
	pod.Generation = 3
	rt := &pleg.PodRuntime{Sandboxes: []*runtimeapi.PodSandboxStatus{readySandbox()}}
	st := podStatus(pod, rt, nil)
	if st.ObservedGeneration != 3 {
		t.Errorf("status observedGeneration %d, want 3", st.ObservedGeneration)
	}
	for _, c := range st.Conditions {
		if c.ObservedGeneration != 3 {
			t.Errorf("condition %s observedGeneration %d, want 3", c.Type, c.ObservedGeneration)
		}
	}
	older := pod.DeepCopy()
	older.Generation = 2
	in := statusInput{pod: older, rt: rt, previous: st, hostIP: "192.0.2.1", now: t0}
	if got := computeStatus(in).ObservedGeneration; got != 3 {
		t.Errorf("a status computed from generation 2 after 3: observedGeneration %d, want 3", got)
	}
}

// A pod that needs a node feature the node does not declare is refused
// with the kubelet's reason and words; one that needs none is admitted.
func TestPodNeedingAnUndeclaredFeatureIsRefused(t *testing.T) {
	plain := testPod(corev1.RestartPolicyAlways, "app")
	if r := featureAdmit(plain, nil); r != nil {
		t.Errorf("a pod needing no feature: %+v", r)
	}
	restartAll := plain.DeepCopy()
	never := corev1.ContainerRestartPolicyNever
	restartAll.Spec.Containers[0].RestartPolicy = &never
	restartAll.Spec.Containers[0].RestartPolicyRules = []corev1.ContainerRestartRule{{
		Action:    corev1.ContainerRestartRuleActionRestartAllContainers,
		ExitCodes: &corev1.ContainerRestartRuleOnExitCodes{Operator: corev1.ContainerRestartRuleOnExitCodesOpIn, Values: []int32{42}},
	}}
	r := featureAdmit(restartAll, nil)
	if r == nil || r.Reason != "PodFeatureUnsupported" || r.Message != "Pod requires node features that are not available: RestartAllContainersOnContainerExits" {
		t.Errorf("a RestartAllContainers rule on a node without the feature: %+v", r)
	}
	if r := featureAdmit(restartAll, []string{"RestartAllContainersOnContainerExits"}); r != nil {
		t.Errorf("the same pod on a node declaring the feature: %+v", r)
	}
}

// What the agent does not do yet of 1.37's container restart rules is
// refused by name; a sidecar's Always is not among it.
func TestContainerRestartRulesAreRefusedByName(t *testing.T) {
	always, never := corev1.ContainerRestartPolicyAlways, corev1.ContainerRestartPolicyNever
	sidecar := testPod(corev1.RestartPolicyAlways, "app")
	sidecar.Spec.InitContainers = []corev1.Container{{Name: "side", Image: "img", RestartPolicy: &always}}
	if errs := unsupported(sidecar); len(errs) != 0 {
		t.Errorf("a sidecar: %v", errs)
	}
	own := testPod(corev1.RestartPolicyAlways, "app")
	own.Spec.Containers[0].RestartPolicy = &never
	own.Spec.Containers[0].RestartPolicyRules = []corev1.ContainerRestartRule{{Action: corev1.ContainerRestartRuleActionRestart,
		ExitCodes: &corev1.ContainerRestartRuleOnExitCodes{Operator: corev1.ContainerRestartRuleOnExitCodesOpIn, Values: []int32{42}}}}
	got := unsupported(own).ToAggregate().Error()
	for _, want := range []string{"spec.containers[0].restartPolicy: Forbidden", "spec.containers[0].restartPolicyRules[0]: Forbidden"} {
		if !strings.Contains(got, want) {
			t.Errorf("want %q in %q", want, got)
		}
	}
}
