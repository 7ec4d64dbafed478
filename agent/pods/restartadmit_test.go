package pods

import (
	"context"
	"io"
	"log/slog"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"nodeagent/agent/source"
	"nodeagent/agent/status"
	"nodeagent/cgroups"
	"nodeagent/cri/critest"
	"nodeagent/manifest"
)

// A restarted agent counts at admission only the pods that may still run:
// one the API shows Succeeded, whose exited containers are still on the
// node, takes no CPU from a pod admitted after it (the upstream spec
// "Restart Kubelet should correctly account for terminated pods after
// restart"). One whose container still runs counts until it is stopped.
func TestRestartedAgentDoesNotCountFinishedPods(t *testing.T) {
	for _, tc := range []struct {
		name      string
		container runtimeapi.ContainerState
		admitted  bool
	}{
		{"finished pod's container exited", runtimeapi.ContainerState_CONTAINER_EXITED, true},
		{"finished pod's container still runs", runtimeapi.ContainerState_CONTAINER_RUNNING, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cpu := func(q string) corev1.ResourceRequirements {
				return corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(q)}}
			}
			finished := testPod(corev1.RestartPolicyNever, "a")
			finished.Name, finished.UID = "finished", "uid-finished"
			finished.Spec.Containers[0].Resources = cpu("1900m")
			finished.Status = corev1.PodStatus{Phase: corev1.PodSucceeded}
			next := testPod(corev1.RestartPolicyAlways, "a")
			next.Name, next.UID = "next", "uid-next"
			next.Spec.Containers[0].Resources = cpu("1")
			for _, p := range []*corev1.Pod{finished, next} {
				r := &p.Spec.Containers[0].Resources
				r.Requests = r.Limits // as the API defaults them
			}
			for _, p := range []*corev1.Pod{finished, next} {
				p.Annotations = map[string]string{manifest.AnnotationConfigSource: source.SourceAPI}
				c := &p.Spec.Containers[0]
				c.ImagePullPolicy, c.TerminationMessagePolicy, c.TerminationMessagePath = corev1.PullIfNotPresent, corev1.TerminationMessageReadFile, "/dev/termination-log"
			}

			cache := fixedCache{finished.UID: {
				UID:        finished.UID,
				Sandboxes:  []*runtimeapi.PodSandboxStatus{{Id: "sb", State: runtimeapi.PodSandboxState_SANDBOX_NOTREADY}},
				Containers: []*runtimeapi.ContainerStatus{record("a", tc.container, 0, "0", t0)},
			}}
			store := runRestarted(t, cache, critest.New(), corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}, finished, next)
			waitUntil(t, "the new pod's admission", func() bool { _, ok := store.Get(next.UID); return ok })
			got, _ := store.Get(next.UID)
			rejected := got.Status.Phase == corev1.PodFailed
			if rejected == tc.admitted || rejected && got.Status.Reason != "OutOfcpu" {
				t.Errorf("new pod: phase %s reason %q message %q; want admitted=%v", got.Status.Phase, got.Status.Reason, got.Status.Message, tc.admitted)
			}
			if tc.admitted {
				if st, ok := store.Get(finished.UID); !ok || st.Status.Phase != corev1.PodSucceeded {
					t.Errorf("finished pod's status %+v, want the API's Succeeded", st)
				}
			}
		})
	}
}

// A pod the API shows evicted (Failed, restartPolicy Always) whose exited
// containers are still on the node is not started again by a restarted
// agent, and keeps the API's phase and reason.
func TestRestartedAgentDoesNotRestartAnEvictedPod(t *testing.T) {
	evicted := testPod(corev1.RestartPolicyAlways, "a")
	evicted.Name, evicted.UID = "evicted", "uid-evicted"
	c := &evicted.Spec.Containers[0]
	c.ImagePullPolicy, c.TerminationMessagePolicy, c.TerminationMessagePath = corev1.PullIfNotPresent, corev1.TerminationMessageReadFile, "/dev/termination-log"
	evicted.Annotations = map[string]string{manifest.AnnotationConfigSource: source.SourceAPI}
	evicted.Status = corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted", Message: "The node was low on resource: memory."}
	cache := fixedCache{evicted.UID: {
		UID:        evicted.UID,
		Sandboxes:  []*runtimeapi.PodSandboxStatus{{Id: "sb", State: runtimeapi.PodSandboxState_SANDBOX_NOTREADY}},
		Containers: []*runtimeapi.ContainerStatus{record("a", runtimeapi.ContainerState_CONTAINER_EXITED, 137, "0", t0)},
	}}
	rt := critest.New()
	store := runRestarted(t, cache, rt, nil, evicted)
	// The API's copy has no conditions; the worker's first status has.
	waitUntil(t, "the adopted pod's first status", func() bool {
		st, _ := store.Get(evicted.UID)
		return st != nil && len(st.Status.Conditions) > 0
	})
	if n := len(rt.Calls("RunPodSandbox")) + len(rt.Calls("StartContainer")); n != 0 {
		t.Errorf("%d sandbox or container starts for a pod the API shows evicted", n)
	}
	if st, ok := store.Get(evicted.UID); !ok || st.Status.Phase != corev1.PodFailed || st.Status.Reason != "Evicted" {
		t.Errorf("status %+v, want the API's Failed/Evicted", st)
	}
}

// runRestarted runs a manager over a runtime that already holds an earlier
// agent's pods (cache), hands it the API's pods, and returns its status
// store; the manager stops with the test.
func runRestarted(t *testing.T, cache fixedCache, rt *critest.Runtime, allocatable corev1.ResourceList, pods ...*corev1.Pod) *status.Store {
	store := status.NewStore()
	m := NewManager(Options{NodeName: "n", MaxPods: 10, PodLogsDir: t.TempDir(), RootDir: t.TempDir(), Allocatable: allocatable}, Deps{
		Runtime: rt, Cache: cache, Store: store, Clock: clock.RealClock{},
		Tree: cgroups.NewTree(nopCgroups{}, cgroups.TreeConfig{PerQOS: true}),
		Log:  slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	ctx, cancel := context.WithCancel(context.Background())
	updates := make(chan source.Update)
	done := make(chan struct{})
	go func() { m.Run(ctx, updates); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	updates <- source.Update{Source: "api", Pods: pods}
	return store
}
