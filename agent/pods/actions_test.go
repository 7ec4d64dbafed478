package pods

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"

	"nodeagent/agent/pleg"
	"nodeagent/cri"
	"nodeagent/probes"
)

// planProbes answers from fixed results: containers a probe wants killed,
// sidecars whose startup probe has not passed.
type planProbes struct {
	kill       map[string]probes.Kind
	notStarted map[string]bool
}

func (p planProbes) Started(_ types.UID, name, _ string) bool { return !p.notStarted[name] }
func (p planProbes) Kill(_ types.UID, name, _ string) (probes.Kind, *int64, bool) {
	k, ok := p.kill[name]
	return k, ptr.To[int64](7), ok
}

const (
	running = runtimeapi.ContainerState_CONTAINER_RUNNING
	exited  = runtimeapi.ContainerState_CONTAINER_EXITED
	created = runtimeapi.ContainerState_CONTAINER_CREATED
	unknown = runtimeapi.ContainerState_CONTAINER_UNKNOWN
)

// inSandbox is a container record made in the ready sandbox, with the
// image the pod asks for.
func inSandbox(name string, state runtimeapi.ContainerState, exit int32, restart string) *runtimeapi.ContainerStatus {
	r := record(name, state, exit, restart, t0.Add(time.Second))
	r.Annotations[cri.AnnotationContainerImageRequest] = "img"
	return r
}

// describe prints a plan as the table expects it.
func describe(a podActions) string {
	if a.killPod {
		return "kill pod"
	}
	parts := []string{[]string{"sandbox keep", "sandbox create", "sandbox never again"}[a.sandbox]}
	for _, c := range a.containers {
		s := c.container.Name + ":" + c.step.String()
		if c.step != keepAsIs {
			s += fmt.Sprintf("#%d", c.restartCount)
		}
		if c.probe != "" {
			s += "(" + strings.ToLower(string(c.probe)) + ")"
		}
		parts = append(parts, s)
	}
	if a.initPending {
		parts = append(parts, "init pending")
	}
	return strings.Join(parts, " ")
}

// The kubelet's rules for one sync, held by a table: the sandbox, init
// containers one at a time, sidecars that must have started, the restart
// policy, failing probes, changed images, interrupted starts, termination.
func TestComputePodActions(t *testing.T) {
	ready := readySandbox()
	dead := readySandbox()
	dead.State = runtimeapi.PodSandboxState_SANDBOX_NOTREADY
	noIP := readySandbox()
	noIP.Network = nil
	withInit := func(policy corev1.RestartPolicy, inits ...string) *corev1.Pod {
		p := testPod(policy, "a", "b")
		for _, n := range inits {
			c := corev1.Container{Name: n, Image: "img"}
			if strings.HasPrefix(n, "side") {
				c.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
			}
			p.Spec.InitContainers = append(p.Spec.InitContainers, c)
		}
		return p
	}
	always, onFailure, never := corev1.RestartPolicyAlways, corev1.RestartPolicyOnFailure, corev1.RestartPolicyNever
	hostNet := withInit(always)
	hostNet.Spec.HostNetwork = true
	changed := inSandbox("a", running, 0, "0")
	changed.Annotations[cri.AnnotationContainerImageRequest] = "old-img"
	sidecarChanged := inSandbox("side1", running, 0, "0")
	sidecarChanged.Annotations[cri.AnnotationContainerImageRequest] = "old-img"
	initChanged := inSandbox("i1", running, 0, "0")
	initChanged.Annotations[cri.AnnotationContainerImageRequest] = "old-img"
	cutOff := inSandbox("a", exited, 128, "2")
	cutOff.StartedAt = 0
	debug := withInit(always)
	debug.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "dbg", Image: "img"}}}
	born := t0.Add(time.Hour)

	type recs = []*runtimeapi.ContainerStatus
	cases := []struct {
		name        string
		pod         *corev1.Pod
		sandbox     *runtimeapi.PodSandboxStatus
		recs        recs
		probes      planProbes
		probeKilled map[string]string
		terminal    bool
		want        string
	}{
		// The sandbox.
		{"nothing yet: a sandbox, then the first init container", withInit(always, "i1", "i2"), nil, nil, planProbes{}, nil, false,
			"sandbox create i1:start#0 init pending"},
		{"no init containers: every app container", withInit(always), nil, nil, planProbes{}, nil, false,
			"sandbox create a:start#0 b:start#0"},
		{"a dead sandbox is replaced; its containers do not count", withInit(always), dead, recs{inSandbox("a", exited, 0, "0")}, planProbes{}, nil, false,
			"sandbox create a:start#1 b:start#0"},
		{"a sandbox without an IP is replaced", withInit(always), noIP, nil, planProbes{}, nil, false,
			"sandbox create a:start#0 b:start#0"},
		{"hostNetwork needs no IP", hostNet, noIP, recs{inSandbox("a", running, 0, "0"), inSandbox("b", running, 0, "0")}, planProbes{}, nil, false,
			"sandbox keep a:keep b:keep"},
		{"Never: a dead sandbox whose containers ran is not re-created", withInit(never), dead, recs{inSandbox("a", exited, 1, "0")}, planProbes{}, nil, false,
			"sandbox never again"},

		// The restart policy.
		{"Always restarts an exit 0", withInit(always), ready, recs{inSandbox("a", exited, 0, "0"), inSandbox("b", running, 0, "3")}, planProbes{}, nil, false,
			"sandbox keep a:restartExited#1 b:keep"},
		{"OnFailure leaves an exit 0", withInit(onFailure), ready, recs{inSandbox("a", exited, 0, "0"), inSandbox("b", exited, 2, "3")}, planProbes{}, nil, false,
			"sandbox keep a:keep b:restartExited#4"},
		{"Never leaves every exit", withInit(never), ready, recs{inSandbox("a", exited, 0, "0"), inSandbox("b", exited, 2, "0")}, planProbes{}, nil, false,
			"sandbox keep a:keep b:keep"},

		// Init containers, one at a time; sidecars must have started.
		{"the next init container once the one before exited 0", withInit(always, "i1", "i2"), ready, recs{inSandbox("i1", exited, 0, "0")}, planProbes{}, nil, false,
			"sandbox keep i1:keep i2:start#0 init pending"},
		{"a running init container holds the rest", withInit(always, "i1", "i2"), ready, recs{inSandbox("i1", running, 0, "0")}, planProbes{}, nil, false,
			"sandbox keep i1:keep init pending"},
		{"a failed init container restarts under Always", withInit(always, "i1", "i2"), ready, recs{inSandbox("i1", exited, 1, "0")}, planProbes{}, nil, false,
			"sandbox keep i1:restartExited#1 init pending"},
		{"a failed init container stays failed under Never", withInit(never, "i1", "i2"), ready, recs{inSandbox("i1", exited, 1, "0")}, planProbes{}, nil, false,
			"sandbox keep i1:keep init pending"},
		{"init containers done: the app containers start", withInit(always, "i1", "i2"), ready, recs{inSandbox("i1", exited, 0, "0"), inSandbox("i2", exited, 0, "0")}, planProbes{}, nil, false,
			"sandbox keep i1:keep i2:keep a:start#0 b:start#0"},
		{"a sidecar not started yet holds the rest", withInit(always, "side1", "i2"), ready, recs{inSandbox("side1", running, 0, "0")}, planProbes{notStarted: map[string]bool{"side1": true}}, nil, false,
			"sandbox keep side1:keep init pending"},
		{"a started sidecar lets the next one start", withInit(always, "side1", "i2"), ready, recs{inSandbox("side1", running, 0, "0")}, planProbes{}, nil, false,
			"sandbox keep side1:keep i2:start#0 init pending"},
		{"a sidecar that exited 0 restarts, even under Never", withInit(never, "side1"), ready, recs{inSandbox("side1", exited, 0, "0")}, planProbes{}, nil, false,
			"sandbox keep side1:restartExited#1 init pending"},
		{"a running pod's sidecar that exited is restarted", withInit(always, "i1", "side1"), ready, recs{inSandbox("i1", exited, 0, "0"), inSandbox("side1", exited, 1, "0"), inSandbox("a", running, 0, "0"), inSandbox("b", running, 0, "0")}, planProbes{}, nil, false,
			"sandbox keep side1:restartExited#1 a:keep b:keep"},
		{"a running pod's sidecar that fails its liveness probe is restarted", withInit(never, "side1"), ready, recs{inSandbox("side1", running, 0, "0"), inSandbox("a", running, 0, "0"), inSandbox("b", running, 0, "0")}, planProbes{kill: map[string]probes.Kind{"side1": probes.Liveness}}, nil, false,
			"sandbox keep side1:restartUnhealthy#1(liveness) a:keep b:keep"},
		{"an app container ran in this sandbox: init containers are not run again", withInit(always, "i1"), ready, recs{inSandbox("a", running, 0, "0")}, planProbes{}, nil, false,
			"sandbox keep a:keep b:start#0"},

		// Probes.
		{"a failed liveness probe: killed and restarted", withInit(always), ready, recs{inSandbox("a", running, 0, "1"), inSandbox("b", running, 0, "0")}, planProbes{kill: map[string]probes.Kind{"a": probes.Liveness}}, nil, false,
			"sandbox keep a:restartUnhealthy#2(liveness) b:keep"},
		{"a failed startup probe under Never: killed, not restarted", withInit(never), ready, recs{inSandbox("a", running, 0, "0"), inSandbox("b", running, 0, "0")}, planProbes{kill: map[string]probes.Kind{"b": probes.Startup}}, nil, false,
			"sandbox keep a:keep b:killUnhealthy#1(startup)"},
		{"a sidecar's failed probe restarts it under Never", withInit(never, "side1"), ready, recs{inSandbox("side1", running, 0, "0")}, planProbes{kill: map[string]probes.Kind{"side1": probes.Liveness}}, nil, false,
			"sandbox keep side1:restartUnhealthy#1(liveness) init pending"},
		{"a container a probe killed restarts whatever its exit code", withInit(onFailure), ready, recs{inSandbox("a", exited, 0, "0"), inSandbox("b", running, 0, "0")}, planProbes{}, map[string]string{"a": "a-0"}, false,
			"sandbox keep a:restartExited#1 b:keep"},

		// Changed, interrupted and unknown containers.
		{"a changed image: replaced at once", withInit(never), ready, recs{changed, inSandbox("b", running, 0, "0")}, planProbes{}, nil, false,
			"sandbox keep a:replaceChanged#1 b:keep"},
		{"a sidecar's changed image: replaced at once, even under Never", withInit(never, "side1"), ready, recs{sidecarChanged}, planProbes{}, nil, false,
			"sandbox keep side1:replaceChanged#1 init pending"},
		{"a running init container is not replaced for its image", withInit(always, "i1"), ready, recs{initChanged}, planProbes{}, nil, false,
			"sandbox keep i1:keep init pending"},
		{"a start an earlier agent cut off: replaced, not counted", withInit(always), ready, recs{cutOff, inSandbox("b", running, 0, "0")}, planProbes{}, nil, false,
			"sandbox keep a:replaceCutOff#2 b:keep"},
		{"created, never started: started", withInit(always), ready, recs{inSandbox("a", created, 0, "4"), inSandbox("b", unknown, 0, "0")}, planProbes{}, nil, false,
			"sandbox keep a:startCreated#5 b:replaceUnknown#1"},
		{"an ephemeral container starts once", debug, ready, recs{inSandbox("a", running, 0, "0"), inSandbox("b", running, 0, "0")}, planProbes{}, nil, false,
			"sandbox keep a:keep b:keep dbg:start#0"},
		{"an ephemeral container that ran is not started again", debug, ready, recs{inSandbox("a", running, 0, "0"), inSandbox("b", running, 0, "0"), inSandbox("dbg", exited, 1, "0")}, planProbes{}, nil, false,
			"sandbox keep a:keep b:keep"},

		// Termination.
		{"a pod that is over starts nothing", withInit(always), ready, recs{inSandbox("a", exited, 1, "0"), inSandbox("b", running, 0, "0")}, planProbes{}, nil, true,
			"kill pod"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rt := &pleg.PodRuntime{UID: tc.pod.UID, Containers: tc.recs}
			if tc.sandbox != nil {
				rt.Sandboxes = []*runtimeapi.PodSandboxStatus{tc.sandbox}
			}
			got := describe(computePodActions(podState{pod: tc.pod, rt: rt, terminal: tc.terminal, born: born, probes: tc.probes, probeKilled: tc.probeKilled}))
			if got != tc.want {
				t.Errorf("actions\n  %s\nwant\n  %s", got, tc.want)
			}
		})
	}
}

// A container whose records are gone (a static pod removed and added
// again) keeps counting its restarts.
func TestComputePodActionsCountsRemovedRestarts(t *testing.T) {
	pod := testPod(corev1.RestartPolicyAlways, "a")
	got := computePodActions(podState{pod: pod, rt: &pleg.PodRuntime{UID: pod.UID, Sandboxes: []*runtimeapi.PodSandboxStatus{readySandbox()}}, probes: planProbes{},
		removedRestarts: func(name string) (int32, bool) { return 5, name == "a" }})
	if len(got.containers) != 1 || got.containers[0].step != startNew || got.containers[0].restartCount != 6 {
		t.Errorf("actions %s, want a started with restart count 6", describe(got))
	}
}
