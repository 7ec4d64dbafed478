package pods

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"nodeagent/agent/pleg"
	"nodeagent/agent/source"
	"nodeagent/agent/volumes"
	"nodeagent/cri"
	"nodeagent/internal/layout"
	"nodeagent/manifest"
)

func testPod(policy corev1.RestartPolicy, names ...string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p-node", Namespace: "default", UID: "uid1"}}
	p.Spec.RestartPolicy = policy
	p.Spec.DNSPolicy = corev1.DNSClusterFirst // the API default: pods reach the manager defaulted
	for _, n := range names {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: n, Image: "img"})
	}
	return p
}

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func record(name string, state runtimeapi.ContainerState, exit int32, restart string, created time.Time) *runtimeapi.ContainerStatus {
	return &runtimeapi.ContainerStatus{
		Id: name + "-" + restart, Metadata: &runtimeapi.ContainerMetadata{Name: name}, State: state, ExitCode: exit,
		CreatedAt: created.UnixNano(), StartedAt: created.Add(time.Second).UnixNano(), FinishedAt: created.Add(2 * time.Second).UnixNano(),
		Annotations: map[string]string{cri.AnnotationRestartCount: restart}, ImageRef: "sha256:abc",
	}
}

func readySandbox() *runtimeapi.PodSandboxStatus {
	return &runtimeapi.PodSandboxStatus{Id: "sb", State: runtimeapi.PodSandboxState_SANDBOX_READY, CreatedAt: t0.UnixNano(),
		Network: &runtimeapi.PodSandboxNetworkStatus{Ip: "10.88.0.9"}}
}

func podStatus(pod *corev1.Pod, rt *pleg.PodRuntime, waiting map[string]waitingReason) corev1.PodStatus {
	return computeStatus(statusInput{pod: pod, rt: rt, waiting: waiting, hostIP: "192.0.2.1", runtimeName: "containerd", startTime: metav1.NewTime(t0), now: t0})
}

func TestComputeStatusPhases(t *testing.T) {
	running := record("a", runtimeapi.ContainerState_CONTAINER_RUNNING, 0, "0", t0)
	exited0 := record("a", runtimeapi.ContainerState_CONTAINER_EXITED, 0, "0", t0)
	exited1 := record("a", runtimeapi.ContainerState_CONTAINER_EXITED, 1, "0", t0)
	cases := []struct {
		name    string
		policy  corev1.RestartPolicy
		recs    []*runtimeapi.ContainerStatus
		waiting map[string]waitingReason
		phase   corev1.PodPhase
	}{
		{"nothing yet", corev1.RestartPolicyAlways, nil, nil, corev1.PodPending},
		{"running", corev1.RestartPolicyAlways, []*runtimeapi.ContainerStatus{running}, nil, corev1.PodRunning},
		{"exited 0 under Never", corev1.RestartPolicyNever, []*runtimeapi.ContainerStatus{exited0}, nil, corev1.PodSucceeded},
		{"exited 1 under Never", corev1.RestartPolicyNever, []*runtimeapi.ContainerStatus{exited1}, nil, corev1.PodFailed},
		{"exited 1 under OnFailure", corev1.RestartPolicyOnFailure, []*runtimeapi.ContainerStatus{exited1}, nil, corev1.PodRunning},
		{"exited 0 under OnFailure", corev1.RestartPolicyOnFailure, []*runtimeapi.ContainerStatus{exited0}, nil, corev1.PodSucceeded},
		{"exited under Always is restarting", corev1.RestartPolicyAlways, []*runtimeapi.ContainerStatus{exited1}, nil, corev1.PodRunning},
		{"crash loop", corev1.RestartPolicyAlways, []*runtimeapi.ContainerStatus{exited1}, map[string]waitingReason{"a": {Reason: "CrashLoopBackOff"}}, corev1.PodRunning},
		{"image pull error before any start", corev1.RestartPolicyAlways, nil, map[string]waitingReason{"a": {Reason: "ErrImagePull"}}, corev1.PodPending},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rt := &pleg.PodRuntime{Sandboxes: []*runtimeapi.PodSandboxStatus{readySandbox()}, Containers: tc.recs}
			st := podStatus(testPod(tc.policy, "a"), rt, tc.waiting)
			if st.Phase != tc.phase {
				t.Errorf("phase %s, want %s (%+v)", st.Phase, tc.phase, st.ContainerStatuses)
			}
		})
	}
}

func TestComputeStatusContainerStates(t *testing.T) {
	pod := testPod(corev1.RestartPolicyAlways, "a", "b")
	rt := &pleg.PodRuntime{
		Sandboxes: []*runtimeapi.PodSandboxStatus{readySandbox()},
		Containers: []*runtimeapi.ContainerStatus{
			record("a", runtimeapi.ContainerState_CONTAINER_RUNNING, 0, "2", t0.Add(time.Minute)),
			record("a", runtimeapi.ContainerState_CONTAINER_EXITED, 137, "1", t0),
			record("b", runtimeapi.ContainerState_CONTAINER_EXITED, 1, "4", t0),
		},
	}
	rt.Containers[1].Reason = "OOMKilled"
	st := podStatus(pod, rt, map[string]waitingReason{"b": {Reason: "CrashLoopBackOff", Message: "back-off 40s"}})
	a, b := st.ContainerStatuses[0], st.ContainerStatuses[1]
	if a.State.Running == nil || !a.Ready || a.RestartCount != 2 || a.ContainerID != "containerd://a-2" || a.ImageID != "sha256:abc" {
		t.Errorf("a: %+v", a)
	}
	if lt := a.LastTerminationState.Terminated; lt == nil || lt.ExitCode != 137 || lt.Reason != "OOMKilled" {
		t.Errorf("a lastState: %+v", a.LastTerminationState)
	}
	if b.State.Waiting == nil || b.State.Waiting.Reason != "CrashLoopBackOff" || b.Ready || b.RestartCount != 4 {
		t.Errorf("b: %+v", b)
	}
	if lt := b.LastTerminationState.Terminated; lt == nil || lt.ExitCode != 1 || lt.Reason != "Error" {
		t.Errorf("b lastState: %+v", b.LastTerminationState)
	}
	if st.PodIP != "10.88.0.9" || st.HostIP != "192.0.2.1" || st.QOSClass != corev1.PodQOSBestEffort {
		t.Errorf("ips/qos: %s %s %s", st.PodIP, st.HostIP, st.QOSClass)
	}
	conds := map[corev1.PodConditionType]corev1.PodCondition{}
	for _, c := range st.Conditions {
		conds[c.Type] = c
	}
	if conds[corev1.PodReady].Status != corev1.ConditionFalse || conds[corev1.PodReady].Message != "containers with unready status: [b]" {
		t.Errorf("Ready: %+v", conds[corev1.PodReady])
	}
	if conds[corev1.PodReadyToStartContainers].Status != corev1.ConditionTrue || conds[corev1.PodInitialized].Status != corev1.ConditionTrue {
		t.Errorf("conditions: %+v", st.Conditions)
	}
}

func TestComputeStatusInitContainers(t *testing.T) {
	pod := testPod(corev1.RestartPolicyAlways, "app")
	pod.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "img"}}
	rt := &pleg.PodRuntime{Sandboxes: []*runtimeapi.PodSandboxStatus{readySandbox()},
		Containers: []*runtimeapi.ContainerStatus{record("init", runtimeapi.ContainerState_CONTAINER_RUNNING, 0, "0", t0)}}
	st := podStatus(pod, rt, nil)
	if st.Phase != corev1.PodPending || st.ContainerStatuses[0].State.Waiting.Reason != "PodInitializing" {
		t.Errorf("while init runs: %s %+v", st.Phase, st.ContainerStatuses[0].State)
	}
	rt.Containers[0] = record("init", runtimeapi.ContainerState_CONTAINER_EXITED, 2, "0", t0)
	never := pod.DeepCopy()
	never.Spec.RestartPolicy = corev1.RestartPolicyNever
	if st := podStatus(never, rt, nil); st.Phase != corev1.PodFailed {
		t.Errorf("failed init under Never: %s", st.Phase)
	}
	rt.Containers[0] = record("init", runtimeapi.ContainerState_CONTAINER_EXITED, 0, "0", t0)
	if st := podStatus(pod, rt, nil); st.ContainerStatuses[0].State.Waiting.Reason != "ContainerCreating" || st.Conditions[1].Status != corev1.ConditionTrue {
		t.Errorf("after init: %+v %+v", st.ContainerStatuses[0].State, st.Conditions[1])
	}
}

// An init container whose record was removed after the app containers
// were created counts as completed, with the kubelet's message (the
// upstream StaticPod spec removes it and restarts the kubelet); a sidecar's
// does not, nor one before any app container exists.
func TestComputeStatusInitRecordLost(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	pod := testPod(corev1.RestartPolicyAlways, "app")
	pod.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "img"}, {Name: "side", Image: "img", RestartPolicy: &always}}
	rt := &pleg.PodRuntime{Sandboxes: []*runtimeapi.PodSandboxStatus{readySandbox()},
		Containers: []*runtimeapi.ContainerStatus{record("app", runtimeapi.ContainerState_CONTAINER_RUNNING, 0, "0", t0)}}
	st := podStatus(pod, rt, nil)
	init := st.InitContainerStatuses[0].State.Terminated
	if init == nil || init.Reason != "Completed" || init.ExitCode != 0 || init.Message != initStatusLost {
		t.Errorf("init container with its record gone: %+v, want Completed with the kubelet's message", st.InitContainerStatuses[0].State)
	}
	if st.InitContainerStatuses[1].State.Waiting == nil {
		t.Errorf("sidecar with no record: %+v, want waiting (it is started again)", st.InitContainerStatuses[1].State)
	}
	rt.Containers = nil
	if st := podStatus(pod, rt, nil); st.InitContainerStatuses[0].State.Waiting == nil {
		t.Errorf("no app container created yet: init %+v, want waiting", st.InitContainerStatuses[0].State)
	}
}

// After a node reboot the old sandbox's containers have all exited and a
// new sandbox re-runs the init containers: the pod is Pending until an app
// container is created in the new sandbox (the kubelet's active containers;
// upstream "A node running restartable init containers reboots").
func TestComputeStatusAfterNodeReboot(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	pod := testPod(corev1.RestartPolicyAlways, "regular-1")
	pod.Spec.InitContainers = []corev1.Container{{Name: "init-1", Image: "img"}, {Name: "sidecar-2", Image: "img", RestartPolicy: &always}, {Name: "init-3", Image: "img"}}
	t1 := t0.Add(time.Minute)
	old := &runtimeapi.PodSandboxStatus{Id: "old", State: runtimeapi.PodSandboxState_SANDBOX_NOTREADY, CreatedAt: t0.UnixNano()}
	current := readySandbox()
	current.CreatedAt = t1.UnixNano()
	exited := runtimeapi.ContainerState_CONTAINER_EXITED
	before := []*runtimeapi.ContainerStatus{
		record("regular-1", exited, 137, "0", t0.Add(4*time.Second)),
		record("init-3", exited, 0, "0", t0.Add(3*time.Second)),
		record("sidecar-2", exited, 137, "0", t0.Add(2*time.Second)),
		record("init-1", exited, 0, "0", t0.Add(time.Second)),
	}
	rt := &pleg.PodRuntime{Sandboxes: []*runtimeapi.PodSandboxStatus{current, old},
		Containers: append([]*runtimeapi.ContainerStatus{record("init-1", runtimeapi.ContainerState_CONTAINER_RUNNING, 0, "1", t1.Add(time.Second))}, before...)}
	st := podStatus(pod, rt, nil)
	if st.Phase != corev1.PodPending || st.InitContainerStatuses[0].RestartCount != 1 {
		t.Errorf("re-initializing: phase %s, init-1 restarts %d; want Pending, 1", st.Phase, st.InitContainerStatuses[0].RestartCount)
	}
	rt.Containers = append([]*runtimeapi.ContainerStatus{
		record("regular-1", runtimeapi.ContainerState_CONTAINER_RUNNING, 0, "1", t1.Add(4*time.Second)),
		record("init-3", exited, 0, "1", t1.Add(3*time.Second)),
		record("sidecar-2", runtimeapi.ContainerState_CONTAINER_RUNNING, 0, "1", t1.Add(2*time.Second)),
		record("init-1", exited, 0, "1", t1.Add(time.Second)),
	}, before...)
	if st := podStatus(pod, rt, nil); st.Phase != corev1.PodRunning {
		t.Errorf("re-initialized: phase %s, want Running", st.Phase)
	}
}

// After an image update, status shows the image a container runs, not the
// spec's: a finished init container keeps the one it ran with.
func TestStatusImageIsTheOneTheContainerRuns(t *testing.T) {
	pod := testPod(corev1.RestartPolicyAlways, "app")
	pod.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "new:2"}}
	done := record("init", runtimeapi.ContainerState_CONTAINER_EXITED, 0, "0", t0)
	done.Annotations[cri.AnnotationContainerImageRequest] = "old:1"
	rt := &pleg.PodRuntime{Sandboxes: []*runtimeapi.PodSandboxStatus{readySandbox()}, Containers: []*runtimeapi.ContainerStatus{done}}
	st := podStatus(pod, rt, nil)
	if got := st.InitContainerStatuses[0].Image; got != "old:1" {
		t.Errorf("init container image %q, want old:1 (what it ran)", got)
	}
	if got := st.ContainerStatuses[0].Image; got != "img" {
		t.Errorf("a container not yet created: image %q, want the spec's img", got)
	}
}

func TestConditionTransitionTimeIsKept(t *testing.T) {
	pod := testPod(corev1.RestartPolicyAlways, "a")
	rt := &pleg.PodRuntime{Sandboxes: []*runtimeapi.PodSandboxStatus{readySandbox()},
		Containers: []*runtimeapi.ContainerStatus{record("a", runtimeapi.ContainerState_CONTAINER_RUNNING, 0, "0", t0)}}
	first := podStatus(pod, rt, nil)
	later := computeStatus(statusInput{pod: pod, rt: rt, previous: first, startTime: metav1.NewTime(t0), now: t0.Add(time.Hour)})
	for i := range later.Conditions {
		if !later.Conditions[i].LastTransitionTime.Equal(&first.Conditions[i].LastTransitionTime) {
			t.Errorf("%s transition time moved without a transition", later.Conditions[i].Type)
		}
	}
}

func TestBackOff(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	b := newRestartBackOff(clk, 0)
	exit := t0
	if in, _ := b.InBackOff("k", exit); in {
		t.Fatal("first crash must restart at once")
	}
	b.Next("k", exit)
	want := []time.Duration{10, 20, 40, 80, 160, 300, 300}
	for i, w := range want {
		exit = clk.Now().Add(time.Second) // crashed a second after the restart
		clk.SetTime(exit)
		in, until := b.InBackOff("k", exit)
		if !in || until.Sub(exit) != w*time.Second {
			t.Fatalf("crash %d: in %v, wait %s, want %ds", i+2, in, until.Sub(exit), w)
		}
		clk.SetTime(until)
		if in, _ := b.InBackOff("k", exit); in {
			t.Fatalf("crash %d: still in back-off when it expired", i+2)
		}
		b.Next("k", exit)
	}
	// A container that ran more than 10 minutes starts over.
	exit = clk.Now().Add(11 * time.Minute)
	clk.SetTime(exit)
	if in, _ := b.InBackOff("k", exit); in {
		t.Error("back-off must reset after 10 minutes of running")
	}
	b.Next("k", exit)
	if d := b.Delay("k"); d != 10*time.Second {
		t.Errorf("delay after reset %s, want 10s", d)
	}
}

func TestShouldRestart(t *testing.T) {
	sidecar := corev1.ContainerRestartPolicyAlways
	c := &corev1.Container{}
	sc := &corev1.Container{RestartPolicy: &sidecar}
	cases := []struct {
		policy corev1.RestartPolicy
		c      *corev1.Container
		init   bool
		exit   int32
		want   bool
	}{
		{corev1.RestartPolicyAlways, c, false, 0, true},
		{corev1.RestartPolicyOnFailure, c, false, 0, false},
		{corev1.RestartPolicyOnFailure, c, false, 1, true},
		{corev1.RestartPolicyNever, c, false, 1, false},
		{corev1.RestartPolicyAlways, c, true, 0, false}, // a finished init container is done
		{corev1.RestartPolicyAlways, c, true, 1, true},
		{corev1.RestartPolicyNever, sc, true, 0, true}, // sidecars always restart
	}
	for _, tc := range cases {
		pod := testPod(tc.policy)
		if got := shouldRestart(pod, tc.c, tc.init, tc.exit); got != tc.want {
			t.Errorf("%s init=%v exit=%d sidecar=%v: %v, want %v", tc.policy, tc.init, tc.exit, tc.c.RestartPolicy != nil, got, tc.want)
		}
	}
}

func withRequests(name, cpu, mem string) *corev1.Pod {
	p := testPod(corev1.RestartPolicyAlways, "a")
	p.Name = name
	p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{}
	if cpu != "" {
		p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse(cpu)
	}
	if mem != "" {
		p.Spec.Containers[0].Resources.Requests[corev1.ResourceMemory] = resource.MustParse(mem)
	}
	return p
}

func TestAdmit(t *testing.T) {
	alloc := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("1Gi")}
	admitted := []*corev1.Pod{withRequests("x", "1500m", "512Mi")}
	if r := admit(withRequests("ok", "500m", "512Mi"), admitted, 110, alloc, nil); r != nil {
		t.Errorf("fits exactly, rejected: %+v", r)
	}
	r := admit(withRequests("cpu", "600m", ""), admitted, 110, alloc, nil)
	if r == nil || r.Reason != "OutOfcpu" || r.Message != "Node didn't have enough resource: cpu, requested: 600, used: 1500, capacity: 2000" {
		t.Errorf("cpu: %+v", r)
	}
	r = admit(withRequests("mem", "", "600Mi"), admitted, 110, alloc, nil)
	if r == nil || r.Reason != "OutOfmemory" || !strings.Contains(r.Message, "memory, requested: 629145600, used: 536870912, capacity: 1073741824") {
		t.Errorf("memory: %+v", r)
	}
	r = admit(withRequests("pods", "", ""), admitted, 1, alloc, nil)
	if r == nil || r.Reason != "OutOfpods" || r.Message != "Node didn't have enough resource: pods, requested: 1, used: 1, capacity: 1" {
		t.Errorf("pods: %+v", r)
	}
	if r := admit(withRequests("be", "", ""), admitted, 110, alloc, nil); r != nil {
		t.Errorf("a BestEffort pod always fits: %+v", r)
	}
	// Requests at int64's edge: counted at their size (not wrapped to 0 or
	// below), and the used sum holds instead of wrapping negative.
	huge := withRequests("huge", "9223372036854775807m", "9223372036854775807")
	if r := admit(huge, nil, 110, alloc, nil); r == nil || r.Reason != "OutOfcpu" {
		t.Errorf("a pod asking for 9.2e15 CPUs must not fit: %+v", r)
	}
	if r := admit(withRequests("small", "", "1"), []*corev1.Pod{huge, huge}, 110, corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}, nil); r == nil || r.Reason != "OutOfmemory" {
		t.Errorf("with two huge pods admitted, the used sum must not wrap and let another in: %+v", r)
	}
}

func testManager(t testing.TB, opts Options) *Manager {
	if opts.NodeName == "" {
		opts.NodeName = "node"
	}
	if opts.RootDir == "" {
		opts.RootDir = t.TempDir()
	}
	return NewManager(opts, Deps{Clock: clocktesting.NewFakeClock(t0)})
}

func TestTerminalReasonWins(t *testing.T) {
	pod := testPod(corev1.RestartPolicyAlways, "a")
	rt := &pleg.PodRuntime{Sandboxes: []*runtimeapi.PodSandboxStatus{readySandbox()},
		Containers: []*runtimeapi.ContainerStatus{record("a", runtimeapi.ContainerState_CONTAINER_EXITED, 137, "0", t0)}}
	st := computeStatus(statusInput{pod: pod, rt: rt, startTime: metav1.NewTime(t0), now: t0,
		terminal: &terminalReason{Reason: "DeadlineExceeded", Message: "Pod was active on the node longer than the specified deadline"}})
	if st.Phase != corev1.PodFailed || st.Reason != "DeadlineExceeded" {
		t.Errorf("phase %s reason %s: a pod the agent ended is Failed even under Always", st.Phase, st.Reason)
	}
	for _, c := range st.Conditions {
		if c.Type == corev1.PodReady && (c.Status != corev1.ConditionFalse || c.Reason != "PodCompleted") {
			t.Errorf("Ready: %+v", c)
		}
	}
}

// A pod the node stops for pressure, preemption or shutdown gets the
// DisruptionTarget condition with the kubelet's reason; one evicted for a
// local storage limit does not.
func TestDisruptionTargetCondition(t *testing.T) {
	pod := testPod(corev1.RestartPolicyAlways, "a")
	rt := &pleg.PodRuntime{Sandboxes: []*runtimeapi.PodSandboxStatus{readySandbox()},
		Containers: []*runtimeapi.ContainerStatus{record("a", runtimeapi.ContainerState_CONTAINER_EXITED, 137, "0", t0)}}
	disruption := func(term *terminalReason) *corev1.PodCondition {
		st := computeStatus(statusInput{pod: pod, rt: rt, startTime: metav1.NewTime(t0), now: t0, terminal: term})
		for i := range st.Conditions {
			if st.Conditions[i].Type == corev1.DisruptionTarget {
				return &st.Conditions[i]
			}
		}
		return nil
	}
	c := disruption(&terminalReason{Reason: "Preempting", Message: "Preempted in order to admit critical pod", Disruption: "Pod was preempted by Kubelet to accommodate a critical pod."})
	if c == nil || c.Status != corev1.ConditionTrue || c.Reason != "TerminationByKubelet" || c.Message != "Pod was preempted by Kubelet to accommodate a critical pod." {
		t.Errorf("preempted: %+v", c)
	}
	if c := disruption(&terminalReason{Reason: "Evicted", Message: `Usage of EmptyDir volume "v" exceeds the limit "1Mi". `}); c != nil {
		t.Errorf("a local storage limit's eviction: %+v", c)
	}
}

// A pod the node stopped is Succeeded once every container exited 0, as
// the kubelet's getPhase of a terminal pod (the preempted pause pods of
// the upstream CriticalPod specs); Failed with the reason otherwise, and
// always for a static pod.
func TestNodeStoppedPodPhaseFollowsExits(t *testing.T) {
	preempted := &terminalReason{Reason: "Preempting", Message: "Preempted in order to admit critical pod", Disruption: "Pod was preempted by Kubelet to accommodate a critical pod.", ByExits: true}
	phase := func(pod *corev1.Pod, exit int32) corev1.PodStatus {
		rt := &pleg.PodRuntime{Sandboxes: []*runtimeapi.PodSandboxStatus{readySandbox()},
			Containers: []*runtimeapi.ContainerStatus{record("a", runtimeapi.ContainerState_CONTAINER_EXITED, exit, "0", t0)}}
		return computeStatus(statusInput{pod: pod, rt: rt, startTime: metav1.NewTime(t0), now: t0, terminal: preempted})
	}
	api := testPod(corev1.RestartPolicyAlways, "a")
	api.Annotations = map[string]string{manifest.AnnotationConfigSource: source.SourceAPI}
	if st := phase(api, 0); st.Phase != corev1.PodSucceeded || st.Reason != "" {
		t.Errorf("exit 0: %s %q, want Succeeded without a reason", st.Phase, st.Reason)
	}
	if st := phase(api, 143); st.Phase != corev1.PodFailed || st.Reason != "Preempting" {
		t.Errorf("exit 143: %s %q, want Failed Preempting", st.Phase, st.Reason)
	}
	if st := phase(testPod(corev1.RestartPolicyAlways, "a"), 0); st.Phase != corev1.PodFailed {
		t.Errorf("a static pod: %s, want Failed", st.Phase)
	}
}

func TestTerminationMessage(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "msg")
	log := filepath.Join(dir, "0.log")
	var lines strings.Builder
	for i := 0; i < 100; i++ {
		fmt.Fprintf(&lines, "2026-01-01T00:00:00Z stdout F line %d\n", i)
	}
	os.WriteFile(log, []byte(lines.String()), 0o644)
	rec := func(exit int32, policy corev1.TerminationMessagePolicy) *runtimeapi.ContainerStatus {
		return &runtimeapi.ContainerStatus{ExitCode: exit, LogPath: log, Annotations: map[string]string{
			cri.AnnotationTerminationMessageFile: file, cri.AnnotationTerminationMessagePolicy: string(policy)}}
	}
	os.WriteFile(file, []byte(strings.Repeat("x", 5000)), 0o644)
	if got := terminationMessage(rec(1, corev1.TerminationMessageReadFile)); len(got) != 4096 {
		t.Errorf("file message must be cut to 4096 bytes, got %d", len(got))
	}
	os.WriteFile(file, nil, 0o644)
	if got := terminationMessage(rec(1, corev1.TerminationMessageReadFile)); got != "" {
		t.Errorf("File policy must not read logs: %q", got)
	}
	if got := terminationMessage(rec(0, corev1.TerminationMessageFallbackToLogsOnError)); got != "" {
		t.Errorf("a successful container must not fall back to logs: %q", got)
	}
	got := terminationMessage(rec(2, corev1.TerminationMessageFallbackToLogsOnError))
	if !strings.HasPrefix(got, "line 20\n") || len(got) > 2048 || strings.Contains(got, "line 19\n") {
		t.Errorf("fallback must be the last 80 lines cut to 2048 bytes: %d bytes starting %q", len(got), got[:min(len(got), 20)])
	}
	// "echo -n DONE; exit 1": an unterminated last line stays unterminated.
	os.WriteFile(log, []byte("2026-01-01T00:00:00Z stdout F first\n2026-01-01T00:00:00Z stdout P DONE\n"), 0o644)
	if got := terminationMessage(rec(1, corev1.TerminationMessageFallbackToLogsOnError)); got != "first\nDONE" {
		t.Errorf("fallback of an unterminated line: %q, want \"first\\nDONE\"", got)
	}
	if joinMessage("OOMKilled", "bye") != "OOMKilled: bye" || joinMessage("", "bye") != "bye" || joinMessage("x", "") != "x" {
		t.Error("joinMessage")
	}
}

func TestBackOffWithAShorterMax(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	b := newRestartBackOff(clk, 4*time.Second)
	b.Next("k", t0)
	if d := b.Delay("k"); d != 4*time.Second {
		t.Errorf("first delay %s, want the 4s max", d)
	}
	b.Next("k", t0)
	if d := b.Delay("k"); d != 4*time.Second {
		t.Errorf("second delay %s, want the 4s max", d)
	}
}

func TestOOMKilledFromCgroupCounter(t *testing.T) {
	pod := testPod(corev1.RestartPolicyNever, "a")
	rec := record("a", runtimeapi.ContainerState_CONTAINER_EXITED, 137, "0", t0)
	rt := &pleg.PodRuntime{Sandboxes: []*runtimeapi.PodSandboxStatus{readySandbox()}, Containers: []*runtimeapi.ContainerStatus{rec}}
	st := computeStatus(statusInput{pod: pod, rt: rt, oomKilled: map[string]bool{rec.Id: true}, startTime: metav1.NewTime(t0), now: t0})
	if term := st.ContainerStatuses[0].State.Terminated; term == nil || term.Reason != "OOMKilled" {
		t.Errorf("a 137 exit the memory cgroup counted as an OOM kill: %+v", term)
	}
	st = computeStatus(statusInput{pod: pod, rt: rt, startTime: metav1.NewTime(t0), now: t0})
	if term := st.ContainerStatuses[0].State.Terminated; term.Reason != "Error" {
		t.Errorf("without the counter a 137 exit is an Error: %+v", term)
	}
}

func TestUnsupportedSpecs(t *testing.T) {
	pod := testPod(corev1.RestartPolicyAlways, "a")
	if errs := unsupported(pod, false); len(errs) != 0 {
		t.Fatalf("a plain pod: %v", errs)
	}
	pod.Spec.Volumes = []corev1.Volume{
		{Name: "ok", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}},
		{Name: "cm", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{}}},
		{Name: "nfs", VolumeSource: corev1.VolumeSource{NFS: &corev1.NFSVolumeSource{}}},
		{Name: "huge", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumHugePages}}},
		{Name: "info", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{}}},
		{Name: "proj", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
			{DownwardAPI: &corev1.DownwardAPIProjection{}}, {ServiceAccountToken: &corev1.ServiceAccountTokenProjection{}}, {ClusterTrustBundle: &corev1.ClusterTrustBundleProjection{}},
		}}}},
	}
	pod.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "S", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{}}}}
	pod.Spec.Containers[0].EnvFrom = []corev1.EnvFromSource{{}}
	pod.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "pull"}}
	pod.Spec.HostUsers = ptr.To(false)
	msg := unsupported(pod, false).ToAggregate().Error()
	for _, want := range []string{"spec.volumes[1].configMap: Forbidden: static pods may not reference API objects", "spec.volumes[2].nfs: Forbidden: nfs volumes are not supported by nodeagent: only emptyDir, hostPath",
		"spec.volumes[3].emptyDir.medium: Unsupported value", "spec.volumes[5].projected.sources[1].serviceAccountToken: Forbidden: static pods",
		"spec.volumes[5].projected.sources[2].clusterTrustBundle: Forbidden: clusterTrustBundle projections are not supported by nodeagent: only configMap, secret, downwardAPI and serviceAccountToken projections",
		"spec.containers[0].env[0].valueFrom.secretKeyRef: Forbidden", "spec.containers[0].envFrom: Forbidden", "spec.imagePullSecrets: Forbidden",
		"spec.hostUsers: Forbidden: user namespaces (hostUsers: false) are not enabled on this node"} {
		if !strings.Contains(msg, want) {
			t.Errorf("%q lacks %q", msg, want)
		}
	}
	for _, ok := range []string{"volumes[0]", "volumes[4]", "sources[0]"} {
		if strings.Contains(msg, ok) {
			t.Errorf("%s is supported for static pods: %q", ok, msg)
		}
	}

	// From the API server, references are the point; what no plugin
	// serves is still refused.
	pod.Annotations = map[string]string{manifest.AnnotationConfigSource: source.SourceAPI}
	msg = unsupported(pod, true).ToAggregate().Error()
	if strings.Contains(msg, "static pods") {
		t.Errorf("API pods may reference API objects: %q", msg)
	}
	if strings.Contains(msg, "hostUsers") {
		t.Errorf("with a userns manager, hostUsers: false is served: %q", msg)
	}
	for _, want := range []string{"spec.volumes[2].nfs: Forbidden", "spec.volumes[3].emptyDir.medium", "spec.volumes[5].projected.sources[2].clusterTrustBundle: Forbidden"} {
		if !strings.Contains(msg, want) {
			t.Errorf("API pod: %q lacks %q", msg, want)
		}
	}
}

// A running sidecar keeps the pod Running after its app containers are
// done, as the kubelet's getPhase counts it; the phase turns terminal once
// the sidecars are stopped, and appsDone is what tells the worker to stop
// them.
func TestSidecarsKeepThePodRunningUntilStopped(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	sidecarUp := record("s", runtimeapi.ContainerState_CONTAINER_RUNNING, 0, "0", t0)
	sidecarStopped := record("s", runtimeapi.ContainerState_CONTAINER_EXITED, 143, "0", t0)
	appUp := record("a", runtimeapi.ContainerState_CONTAINER_RUNNING, 0, "0", t0)
	app0 := record("a", runtimeapi.ContainerState_CONTAINER_EXITED, 0, "0", t0)
	app1 := record("a", runtimeapi.ContainerState_CONTAINER_EXITED, 1, "0", t0)
	cases := []struct {
		name     string
		policy   corev1.RestartPolicy
		recs     []*runtimeapi.ContainerStatus
		phase    corev1.PodPhase
		appsDone bool
	}{
		{"both running", corev1.RestartPolicyNever, []*runtimeapi.ContainerStatus{sidecarUp, appUp}, corev1.PodRunning, false},
		{"app succeeded, sidecar running", corev1.RestartPolicyNever, []*runtimeapi.ContainerStatus{sidecarUp, app0}, corev1.PodRunning, true},
		{"app succeeded, sidecar stopped", corev1.RestartPolicyNever, []*runtimeapi.ContainerStatus{sidecarStopped, app0}, corev1.PodSucceeded, true},
		{"app failed under Never, sidecar running", corev1.RestartPolicyNever, []*runtimeapi.ContainerStatus{sidecarUp, app1}, corev1.PodRunning, true},
		{"app failed under Never, sidecar stopped", corev1.RestartPolicyNever, []*runtimeapi.ContainerStatus{sidecarStopped, app1}, corev1.PodFailed, true},
		{"app failed under OnFailure restarts", corev1.RestartPolicyOnFailure, []*runtimeapi.ContainerStatus{sidecarUp, app1}, corev1.PodRunning, false},
		{"app succeeded under OnFailure", corev1.RestartPolicyOnFailure, []*runtimeapi.ContainerStatus{sidecarUp, app0}, corev1.PodRunning, true},
		{"app exited under Always restarts", corev1.RestartPolicyAlways, []*runtimeapi.ContainerStatus{sidecarUp, app0}, corev1.PodRunning, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod := testPod(tc.policy, "a")
			pod.Spec.InitContainers = []corev1.Container{{Name: "s", Image: "img", RestartPolicy: &always}}
			rt := &pleg.PodRuntime{Sandboxes: []*runtimeapi.PodSandboxStatus{readySandbox()}, Containers: tc.recs}
			st := podStatus(pod, rt, nil)
			if st.Phase != tc.phase {
				t.Errorf("phase %s, want %s", st.Phase, tc.phase)
			}
			if got := appsDone(pod, st.ContainerStatuses); got != tc.appsDone {
				t.Errorf("appsDone = %v, want %v", got, tc.appsDone)
			}
		})
	}
}

func TestNodeFilesLayout(t *testing.T) {
	root := t.TempDir()
	files := nodeFiles{root: layout.Root(root), volumes: volumes.New(volumes.Config{Root: root, Clock: clocktesting.NewFakeClock(t0)})}
	pod := testPod(corev1.RestartPolicyAlways, "web")
	msg, err := files.TerminationMessageFile(pod, "web")
	if err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(msg); err != nil || st.Mode().Perm() != 0o666 || filepath.Dir(msg) != filepath.Join(root, "pods", "uid1", "containers", "web") {
		t.Errorf("termination message file %s: %v %v; want mode 0666 under the pod's containers/web", msg, st, err)
	}
	hosts, err := files.HostsFile(pod, []byte("127.0.0.1\tlocalhost\n"))
	if b, _ := os.ReadFile(hosts); err != nil || hosts != filepath.Join(root, "pods", "uid1", "etc-hosts") || string(b) != "127.0.0.1\tlocalhost\n" {
		t.Errorf("hosts file %s holds %q (%v)", hosts, b, err)
	}
	if _, _, err := files.Volume(pod, "cache"); err == nil {
		t.Error("a volume not set up was looked up")
	}
	pod.Spec.Volumes = []corev1.Volume{{Name: "cache", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	if _, failures := files.volumes.SetUp(context.Background(), pod); len(failures) > 0 {
		t.Fatal(failures)
	}
	dir, readOnly, err := files.Volume(pod, "cache")
	if st, serr := os.Stat(dir); err != nil || serr != nil || !st.IsDir() || readOnly || dir != filepath.Join(root, "pods", "uid1", "volumes", "kubernetes.io~empty-dir", "cache") {
		t.Errorf("emptyDir %s (read-only %v): %v %v", dir, readOnly, err, serr)
	}
}

// A deleted API pod whose containers stopped turns terminal whatever its
// restart policy, as the kubelet's podIsTerminal and TerminatePod make it.
func TestComputeStatusOfAStoppedDeletedPod(t *testing.T) {
	killed := record("a", runtimeapi.ContainerState_CONTAINER_EXITED, 137, "0", t0)
	exited0 := record("a", runtimeapi.ContainerState_CONTAINER_EXITED, 0, "0", t0)
	cases := []struct {
		name   string
		policy corev1.RestartPolicy
		recs   []*runtimeapi.ContainerStatus
		phase  corev1.PodPhase
		reason string
	}{
		{"killed under Always", corev1.RestartPolicyAlways, []*runtimeapi.ContainerStatus{killed}, corev1.PodFailed, "Error"},
		{"killed under OnFailure", corev1.RestartPolicyOnFailure, []*runtimeapi.ContainerStatus{killed}, corev1.PodFailed, "Error"},
		{"exit 0 under Always", corev1.RestartPolicyAlways, []*runtimeapi.ContainerStatus{exited0}, corev1.PodSucceeded, "Completed"},
		{"never started (image pull failing)", corev1.RestartPolicyAlways, nil, corev1.PodFailed, "ContainerStatusUnknown"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rt := &pleg.PodRuntime{Sandboxes: []*runtimeapi.PodSandboxStatus{readySandbox()}, Containers: tc.recs}
			pod := testPod(tc.policy, "a")
			if st := podStatus(pod, rt, nil); tc.recs != nil && st.Phase == tc.phase && tc.policy != corev1.RestartPolicyNever {
				t.Fatalf("phase %s before the deletion: the case proves nothing", st.Phase)
			}
			st := computeStatus(statusInput{pod: pod, rt: rt, stopped: true, startTime: metav1.NewTime(t0), now: t0})
			if st.Phase != tc.phase {
				t.Errorf("phase %s, want %s", st.Phase, tc.phase)
			}
			term := st.ContainerStatuses[0].State.Terminated
			if term == nil || term.Reason != tc.reason {
				t.Fatalf("state %+v, want terminated with %s", st.ContainerStatuses[0].State, tc.reason)
			}
			if tc.recs == nil && term.ExitCode != 137 {
				t.Errorf("unknown end exit code %d, want 137", term.ExitCode)
			}
		})
	}

	// Init containers: one that never started stays waiting only behind
	// one that tried; the app container of an uninitialized pod is left.
	pod := testPod(corev1.RestartPolicyAlways, "app")
	pod.Spec.InitContainers = []corev1.Container{{Name: "i1", Image: "img"}, {Name: "i2", Image: "img"}}
	rt := &pleg.PodRuntime{Sandboxes: []*runtimeapi.PodSandboxStatus{readySandbox()},
		Containers: []*runtimeapi.ContainerStatus{record("i1", runtimeapi.ContainerState_CONTAINER_EXITED, 137, "0", t0)}}
	st := computeStatus(statusInput{pod: pod, rt: rt, stopped: true, startTime: metav1.NewTime(t0), now: t0})
	if st.Phase != corev1.PodFailed || st.InitContainerStatuses[0].State.Terminated == nil ||
		st.InitContainerStatuses[1].State.Waiting == nil || st.ContainerStatuses[0].State.Waiting == nil {
		t.Errorf("uninitialized pod: %s init %+v app %+v", st.Phase, st.InitContainerStatuses, st.ContainerStatuses[0].State)
	}
}

func TestFinishedInitContainerIsReady(t *testing.T) {
	pod := testPod(corev1.RestartPolicyNever, "app")
	pod.Spec.InitContainers = []corev1.Container{{Name: "ok", Image: "img"}, {Name: "bad", Image: "img"}}
	rt := &pleg.PodRuntime{Sandboxes: []*runtimeapi.PodSandboxStatus{readySandbox()}, Containers: []*runtimeapi.ContainerStatus{
		record("ok", runtimeapi.ContainerState_CONTAINER_EXITED, 0, "0", t0),
		record("bad", runtimeapi.ContainerState_CONTAINER_EXITED, 1, "0", t0.Add(time.Second)),
	}}
	st := podStatus(pod, rt, nil)
	if !st.InitContainerStatuses[0].Ready || st.InitContainerStatuses[1].Ready {
		t.Errorf("ready: exit 0 %v (want true), exit 1 %v (want false)", st.InitContainerStatuses[0].Ready, st.InitContainerStatuses[1].Ready)
	}
}

func TestAdmissionRefusesOtherOSesAndAppArmorWithoutTheHost(t *testing.T) {
	pod := testPod(corev1.RestartPolicyAlways, "a")
	if r := osAdmit(pod); r != nil {
		t.Errorf("a linux pod: %+v", r)
	}
	win := pod.DeepCopy()
	win.Spec.OS = &corev1.PodOS{Name: "windows"}
	if r := osAdmit(win); r == nil || r.Reason != "PodOSNotSupported" {
		t.Errorf("spec.os windows: %+v", r)
	}
	sel := pod.DeepCopy()
	sel.Spec.NodeSelector = map[string]string{corev1.LabelOSStable: "windows"}
	if r := osAdmit(sel); r == nil || r.Reason != "PodOSSelectorNodeLabelDoesNotMatch" {
		t.Errorf("nodeSelector windows: %+v", r)
	}

	confined := pod.DeepCopy()
	confined.Annotations = map[string]string{corev1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix + "a": corev1.DeprecatedAppArmorBetaProfileRuntimeDefault}
	if r := appArmorAdmit(confined, false); r == nil || r.Reason != "AppArmor" || !strings.Contains(r.Message, "AppArmor is not enabled on the host") {
		t.Errorf("annotation without AppArmor: %+v", r)
	}
	if r := appArmorAdmit(confined, true); r != nil {
		t.Errorf("annotation with AppArmor: %+v", r)
	}
	field := pod.DeepCopy()
	field.Spec.SecurityContext = &corev1.PodSecurityContext{AppArmorProfile: &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeUnconfined}}
	if r := appArmorAdmit(field, false); r != nil {
		t.Errorf("unconfined needs no AppArmor: %+v", r)
	}
	field.Spec.SecurityContext.AppArmorProfile.Type = corev1.AppArmorProfileTypeRuntimeDefault
	if r := appArmorAdmit(field, false); r == nil {
		t.Error("runtime/default field without AppArmor admitted")
	}
}

func TestAdmissionCountsDevicePluginResources(t *testing.T) {
	gpu := func(name, n string) *corev1.Pod {
		p := testPod(corev1.RestartPolicyAlways, "a")
		p.Name = name
		q := corev1.ResourceList{"example.com/gpu": resource.MustParse(n)}
		p.Spec.Containers[0].Resources = corev1.ResourceRequirements{Requests: q, Limits: q}
		return p
	}
	extended := corev1.ResourceList{"example.com/gpu": resource.MustParse("2")}
	if r := admit(gpu("one", "1"), []*corev1.Pod{gpu("held", "1")}, 110, nil, extended); r != nil {
		t.Errorf("1 of 2 with 1 held: %+v", r)
	}
	if r := admit(gpu("two", "2"), []*corev1.Pod{gpu("held", "1")}, 110, nil, extended); r == nil || r.Reason != "OutOfexample.com/gpu" {
		t.Errorf("2 of 2 with 1 held: %+v", r)
	}
	other := gpu("other", "1")
	other.Spec.Containers[0].Resources.Limits = corev1.ResourceList{"example.org/fpga": resource.MustParse("1")}
	other.Spec.Containers[0].Resources.Requests = other.Spec.Containers[0].Resources.Limits
	if r := admit(other, nil, 110, nil, extended); r != nil {
		t.Errorf("a resource no plugin serves is left to whoever advertises it: %+v", r)
	}
}

func TestSysctlAdmission(t *testing.T) {
	with := func(hostNet bool, names ...string) *corev1.Pod {
		p := testPod(corev1.RestartPolicyAlways, "a")
		p.Spec.HostNetwork = hostNet
		p.Spec.SecurityContext = &corev1.PodSecurityContext{}
		for _, n := range names {
			p.Spec.SecurityContext.Sysctls = append(p.Spec.SecurityContext.Sysctls, corev1.Sysctl{Name: n, Value: "1"})
		}
		return p
	}
	if r := sysctlAdmit(with(false, "kernel.shm_rmid_forced", "net/ipv4/ip_local_port_range"), nil); r != nil {
		t.Errorf("safe sysctls: %+v", r)
	}
	if r := sysctlAdmit(with(false, "kernel.msgmax"), nil); r == nil || r.Reason != "SysctlForbidden" || r.Message != `forbidden sysctl: "kernel.msgmax" not allowlisted` {
		t.Errorf("unsafe, not allowed: %+v", r)
	}
	if r := sysctlAdmit(with(false, "kernel.msgmax"), []string{"kernel.msg*"}); r != nil {
		t.Errorf("allowed by a prefix pattern: %+v", r)
	}
	if r := sysctlAdmit(with(true, "net.ipv4.ip_local_port_range"), nil); r == nil || !strings.Contains(r.Message, "not allowed with host network enabled") {
		t.Errorf("a net sysctl on a host-network pod: %+v", r)
	}
}

// Entries are garbage-collected: a container that kept running past the
// reset time, or the old key of a changed image, leaves nothing behind.
func TestBackOffEntriesAreCollected(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	b := newRestartBackOff(clk, 0)
	b.Next("uid1/a/img:1", t0)
	b.Next("uid1/a/img:1", t0)
	b.Next("uid2/b/img", t0)
	clk.Step(5 * time.Minute)
	b.Next("uid1/a/img:2", clk.Now()) // the image changed: a new key
	b.GC()
	if b.Len() != 3 {
		t.Fatalf("GC dropped live entries: %d left, want 3", b.Len())
	}
	clk.Step(backOffResetTime - time.Minute)
	b.GC()
	if b.Len() != 1 || b.Delay("uid1/a/img:2") == 0 {
		t.Errorf("after 14 minutes: %d entries, img:2 delay %s; want only img:2 kept", b.Len(), b.Delay("uid1/a/img:2"))
	}
	if len(b.keys) != 1 {
		t.Errorf("the key index kept %d pods, want 1", len(b.keys))
	}
	pulls := newImagePullBackOff(clk)
	pulls.Next("uid3/c/img", clk.Now())
	clk.Step(2*maxBackOff + time.Second)
	pulls.GC()
	if pulls.Len() != 0 {
		t.Error("an image pull entry outlived twice the max back-off")
	}
}

// supplementalGroupsPolicy Strict needs the runtime's support (its status
// features), else the pod is refused in the kubelet's words.
func TestSupplementalGroupsAdmit(t *testing.T) {
	strict := corev1.SupplementalGroupsPolicyStrict
	pod := &corev1.Pod{Spec: corev1.PodSpec{SecurityContext: &corev1.PodSecurityContext{SupplementalGroupsPolicy: &strict}}}
	if r := supplementalGroupsAdmit(pod, false); r == nil || r.Reason != "SupplementalGroupsPolicyNotSupported" || r.Message != "SupplementalGroupsPolicy=Strict is not supported in this node" {
		t.Errorf("Strict without runtime support: %+v", r)
	}
	if r := supplementalGroupsAdmit(pod, true); r != nil {
		t.Errorf("Strict with runtime support: %+v", r)
	}
	merge := corev1.SupplementalGroupsPolicyMerge
	pod.Spec.SecurityContext.SupplementalGroupsPolicy = &merge
	if r := supplementalGroupsAdmit(pod, false); r != nil {
		t.Errorf("Merge: %+v", r)
	}
}

// The runtime's account of the process's identity is the status's user.
func TestStatusUserIsTheRuntimes(t *testing.T) {
	pod := testPod(corev1.RestartPolicyAlways, "app")
	rec := record("app", runtimeapi.ContainerState_CONTAINER_RUNNING, 0, "0", t0)
	rec.User = &runtimeapi.ContainerUser{Linux: &runtimeapi.LinuxContainerUser{Uid: 1000, Gid: 3000, SupplementalGroups: []int64{3000, 4000}}}
	rt := &pleg.PodRuntime{Sandboxes: []*runtimeapi.PodSandboxStatus{readySandbox()}, Containers: []*runtimeapi.ContainerStatus{rec}}
	u := podStatus(pod, rt, nil).ContainerStatuses[0].User
	if u == nil || u.Linux == nil || u.Linux.UID != 1000 || u.Linux.GID != 3000 || len(u.Linux.SupplementalGroups) != 2 {
		t.Errorf("user %+v, want the runtime's 1000/3000 [3000 4000]", u)
	}
}
