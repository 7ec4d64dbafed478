package pods

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"nodeagent/agent/pleg"
	"nodeagent/cri"
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

// 1.35's container restart rules decide a container's restart and the
// pod's phase: the first matching rule, then the container's policy, then
// the pod's (the kubelet's ContainerShouldRestart and getPhase).
func TestContainerRestartRules(t *testing.T) {
	never, always := corev1.ContainerRestartPolicyNever, corev1.ContainerRestartPolicyAlways
	pod := testPod(corev1.RestartPolicyAlways, "app", "other")
	app := &pod.Spec.Containers[0]
	app.RestartPolicy = &never
	app.RestartPolicyRules = []corev1.ContainerRestartRule{{Action: corev1.ContainerRestartRuleActionRestart,
		ExitCodes: &corev1.ContainerRestartRuleOnExitCodes{Operator: corev1.ContainerRestartRuleOnExitCodesOpIn, Values: []int32{42}}}}
	for code, want := range map[int32]bool{42: true, 1: false, 0: false} {
		if got := shouldRestart(pod, app, false, code); got != want {
			t.Errorf("exit %d under rule In [42] and policy Never: restart %v, want %v", code, got, want)
		}
	}
	app.RestartPolicyRules[0].ExitCodes.Operator = corev1.ContainerRestartRuleOnExitCodesOpNotIn
	if !shouldRestart(pod, app, false, 1) || shouldRestart(pod, app, false, 42) {
		t.Error("rule NotIn [42]: want a restart for 1, none for 42")
	}
	// The pod's policy still holds for the container without its own.
	if !shouldRestart(pod, &pod.Spec.Containers[1], false, 0) {
		t.Error("a container without its own policy in an Always pod must restart")
	}

	// Phase: a pod Never with a container Always stays Running while that
	// container may restart; done once nothing will be restarted.
	term := func(name string, code int32) corev1.ContainerStatus {
		return corev1.ContainerStatus{Name: name, ContainerID: "c", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code}}}
	}
	p := testPod(corev1.RestartPolicyNever, "app", "keeper")
	p.Spec.Containers[1].RestartPolicy = &always
	if got := podPhase(p, nil, []corev1.ContainerStatus{term("app", 0), term("keeper", 0)}, false, true); got != corev1.PodRunning {
		t.Errorf("pod Never, a container Always exited: %s, want Running", got)
	}
	p.Spec.Containers[1].RestartPolicy = &never
	if got := podPhase(p, nil, []corev1.ContainerStatus{term("app", 0), term("keeper", 0)}, false, true); got != corev1.PodSucceeded {
		t.Errorf("pod Never, all exited 0: %s, want Succeeded", got)
	}
	if got := podPhase(p, nil, []corev1.ContainerStatus{term("app", 0), term("keeper", 3)}, false, true); got != corev1.PodFailed {
		t.Errorf("pod Never, one exited 3: %s, want Failed", got)
	}
	// An Always pod's container with policy Never that failed: Failed.
	q := testPod(corev1.RestartPolicyAlways, "app")
	q.Spec.Containers[0].RestartPolicy = &never
	if got := podPhase(q, nil, []corev1.ContainerStatus{term("app", 1)}, false, true); got != corev1.PodFailed {
		t.Errorf("pod Always, the container Never exited 1: %s, want Failed", got)
	}
}

// A restarted agent reports the start time the first one gave the pod
// (carried on its sandboxes), not the sandbox's creation.
func TestRecoveredStartTime(t *testing.T) {
	now := time.Unix(2000, 0)
	first := time.Date(2026, 11, 26, 15, 7, 0, 123, time.UTC)
	rt := &pleg.PodRuntime{Sandboxes: []*runtimeapi.PodSandboxStatus{
		{CreatedAt: time.Unix(1500, 0).UnixNano()},
		{CreatedAt: time.Unix(1004, 0).UnixNano(), Annotations: map[string]string{cri.AnnotationPodStartTime: first.Format(time.RFC3339Nano)}},
	}}
	if got := recoveredStartTime(rt, now); !got.Time.Equal(first) {
		t.Errorf("with the annotation: %v, want %v", got, first)
	}
	rt.Sandboxes[1].Annotations = nil
	if got := recoveredStartTime(rt, now); !got.Time.Equal(time.Unix(1004, 0)) {
		t.Errorf("without it: %v, want the oldest sandbox's creation", got)
	}
	if got := recoveredStartTime(nil, now); !got.Time.Equal(now) {
		t.Errorf("no sandbox: %v, want now", got)
	}
}

// The reclaim before a disk eviction removes a finished pod's containers:
// the statuses they gave stand, as the kubelet keeps an old terminated
// status, and the pod stays Succeeded.
func TestFinishedContainersStatusOutlivesItsRecords(t *testing.T) {
	pod := testPod(corev1.RestartPolicyNever, "app")
	pod.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "img"}}
	notReady := readySandbox()
	notReady.State = runtimeapi.PodSandboxState_SANDBOX_NOTREADY
	rt := &pleg.PodRuntime{Sandboxes: []*runtimeapi.PodSandboxStatus{notReady}, Containers: []*runtimeapi.ContainerStatus{
		record("app", runtimeapi.ContainerState_CONTAINER_EXITED, 0, "0", t0.Add(time.Second)),
		record("init", runtimeapi.ContainerState_CONTAINER_EXITED, 0, "0", t0)}}
	before := podStatus(pod, rt, nil)
	if before.Phase != corev1.PodSucceeded || before.ContainerStatuses[0].State.Terminated == nil {
		t.Fatalf("with its records: phase %s, %+v", before.Phase, before.ContainerStatuses[0].State)
	}
	rt.Containers = nil
	after := computeStatus(statusInput{pod: pod, rt: rt, previous: before, hostIP: "192.0.2.1", now: t0.Add(time.Minute)})
	if after.Phase != corev1.PodSucceeded {
		t.Errorf("without its records: phase %s", after.Phase)
	}
	for i, pair := range [][2]corev1.ContainerStatus{{before.InitContainerStatuses[0], after.InitContainerStatuses[0]}, {before.ContainerStatuses[0], after.ContainerStatuses[0]}} {
		b, a := pair[0], pair[1]
		if a.State.Terminated == nil || a.ContainerID != b.ContainerID || a.State.Terminated.ExitCode != 0 || a.State.Terminated.FinishedAt != b.State.Terminated.FinishedAt {
			t.Errorf("container %d without its records: %+v, before %+v", i, a, b)
		}
	}
}

// The records of a finished pod go oldest first: once only the newest is
// left, the exit of the one before still shows as lastState.
func TestFinishedContainersLastStateOutlivesItsRecord(t *testing.T) {
	pod := testPod(corev1.RestartPolicyOnFailure, "app")
	rt := &pleg.PodRuntime{Sandboxes: []*runtimeapi.PodSandboxStatus{readySandbox()}, Containers: []*runtimeapi.ContainerStatus{
		record("app", runtimeapi.ContainerState_CONTAINER_EXITED, 0, "1", t0.Add(time.Second)),
		record("app", runtimeapi.ContainerState_CONTAINER_EXITED, 3, "0", t0)}}
	before := podStatus(pod, rt, nil)
	if last := before.ContainerStatuses[0].LastTerminationState.Terminated; before.Phase != corev1.PodSucceeded || last == nil || last.ExitCode != 3 {
		t.Fatalf("with both records: phase %s, lastState %+v", before.Phase, before.ContainerStatuses[0].LastTerminationState)
	}
	rt.Containers = rt.Containers[:1]
	after := computeStatus(statusInput{pod: pod, rt: rt, previous: before, hostIP: "192.0.2.1", runtimeName: "containerd", now: t0.Add(time.Minute)})
	cs := after.ContainerStatuses[0]
	if last := cs.LastTerminationState.Terminated; last == nil || last.ExitCode != 3 || cs.State.Terminated == nil || cs.State.Terminated.ExitCode != 0 {
		t.Errorf("with the older record gone: state %+v, lastState %+v", cs.State, cs.LastTerminationState)
	}
}

// A status computed while a finished pod's records are being removed may
// see an older failed run of an OnFailure container: the pod stays
// Succeeded, as the kubelet forces a terminal phase back.
func TestNoWayOutOfATerminalPhase(t *testing.T) {
	pod := testPod(corev1.RestartPolicyOnFailure, "app")
	rt := &pleg.PodRuntime{Sandboxes: []*runtimeapi.PodSandboxStatus{readySandbox()}, Containers: []*runtimeapi.ContainerStatus{
		record("app", runtimeapi.ContainerState_CONTAINER_EXITED, 0, "1", t0.Add(time.Second)),
		record("app", runtimeapi.ContainerState_CONTAINER_EXITED, 1, "0", t0)}}
	before := podStatus(pod, rt, nil)
	if before.Phase != corev1.PodSucceeded {
		t.Fatalf("phase %s, want Succeeded", before.Phase)
	}
	rt.Containers = rt.Containers[1:]
	after := computeStatus(statusInput{pod: pod, rt: rt, previous: before, hostIP: "192.0.2.1", now: t0.Add(time.Minute)})
	if after.Phase != corev1.PodSucceeded {
		t.Errorf("with only the failed run's record left: phase %s, want Succeeded", after.Phase)
	}
}
