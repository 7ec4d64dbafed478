package status

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"

	"nodeagent/agent/source"
	"nodeagent/internal/notify"
	"nodeagent/manifest"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func TestMergeStatusKeepsOthersConditionsOwnsPodScheduledAndHonoursReadinessGates(t *testing.T) {
	api := &corev1.Pod{
		Spec: corev1.PodSpec{ReadinessGates: []corev1.PodReadinessGate{{ConditionType: "example.com/lb"}}},
		Status: corev1.PodStatus{Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, Reason: "by-scheduler"},
			{Type: "example.com/lb", Status: corev1.ConditionFalse},
			{Type: corev1.PodReady, Status: corev1.ConditionFalse},
		}},
	}
	local := corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{
		{Type: corev1.ContainersReady, Status: corev1.ConditionTrue},
		{Type: corev1.PodReady, Status: corev1.ConditionTrue},
		{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, ObservedGeneration: 2},
	}}
	got := mergeStatus(api, local)
	byType := map[corev1.PodConditionType]corev1.PodCondition{}
	for _, c := range got.Conditions {
		byType[c.Type] = c
	}
	// PodScheduled is the node's, as in the kubelet's PodConditionsByKubelet.
	if c := byType[corev1.PodScheduled]; c.Reason == "by-scheduler" || c.ObservedGeneration != 2 {
		t.Errorf("PodScheduled is not the node's: %+v", got.Conditions)
	}
	if byType["example.com/lb"].Status != corev1.ConditionFalse {
		t.Errorf("the gate's condition was not kept: %+v", got.Conditions)
	}
	if r := byType[corev1.PodReady]; r.Status != corev1.ConditionFalse || r.Reason != "ReadinessGatesNotReady" {
		t.Errorf("Ready = %+v, want False while the gate is False", r)
	}

	api.Status.Conditions[1].Status = corev1.ConditionTrue
	got = mergeStatus(api, local)
	for _, c := range got.Conditions {
		if c.Type == corev1.PodReady && c.Status != corev1.ConditionTrue {
			t.Errorf("Ready = %+v with every gate True", c)
		}
	}
	// A pod bound without the scheduler gets PodScheduled from the node.
	got = mergeStatus(&corev1.Pod{}, local)
	if !hasCondition(got.Conditions, corev1.PodScheduled) {
		t.Errorf("no PodScheduled: %+v", got.Conditions)
	}
}

// The patch removes nothing the node does not own: DRA's claim statuses
// and the scheduler's nomination stay as the API has them.
func TestPodStatusPatchKeepsWhatOthersOwn(t *testing.T) {
	name := "gpu-claim"
	api := &corev1.Pod{Status: corev1.PodStatus{
		Phase:                 corev1.PodPending,
		NominatedNodeName:     "n1",
		ResourceClaimStatuses: []corev1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: &name}},
	}}
	want := mergeStatus(api, corev1.PodStatus{Phase: corev1.PodRunning})
	patch, err := podStatusPatch("u-1", api.Status, want)
	if err != nil {
		t.Fatal(err)
	}
	for _, field := range []string{"resourceClaimStatuses", "nominatedNodeName"} {
		if strings.Contains(string(patch), field) {
			t.Errorf("patch %s touches %s, which the node does not own", patch, field)
		}
	}
}

func TestPodStatusPatchCarriesTheUID(t *testing.T) {
	patch, err := podStatusPatch("u-1", corev1.PodStatus{Phase: corev1.PodPending}, corev1.PodStatus{Phase: corev1.PodRunning})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(patch), `"uid":"u-1"`) || !strings.Contains(string(patch), `"phase":"Running"`) {
		t.Errorf("patch %s", patch)
	}
}

// countVerb counts the fake client's requests of one verb.
func countVerb(client *fake.Clientset, verb string) int {
	n := 0
	for _, a := range client.Actions() {
		if a.GetVerb() == verb {
			n++
		}
	}
	return n
}

// statusStore is a Local of fixed pods.
type statusStore map[types.UID]*corev1.Pod

func (s statusStore) Get(uid types.UID) (*corev1.Pod, bool) { p, ok := s[uid]; return p, ok }

func (s statusStore) List() []corev1.Pod {
	var out []corev1.Pod
	for _, p := range s {
		out = append(out, *p)
	}
	return out
}

// apiCache reads the pods as the fake API server stores them.
type apiCache struct{ client *fake.Clientset }

func (c apiCache) Pod(namespace, name string) (*corev1.Pod, bool) {
	p, err := c.client.CoreV1().Pods(namespace).Get(context.Background(), name, metav1.GetOptions{})
	return p, err == nil
}

func TestStatusSyncPatchesAnUnchangedStatusOnce(t *testing.T) {
	apiPod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: "u-1",
		Annotations: map[string]string{manifest.AnnotationConfigSource: source.SourceAPI}}}
	client := fake.NewSimpleClientset(apiPod)
	// The agent's times have nanoseconds; the API server keeps seconds.
	started := metav1.NewTime(time.Date(2026, 11, 24, 4, 0, 0, 123456789, time.UTC))
	local := apiPod.DeepCopy()
	local.Status = corev1.PodStatus{
		Phase: corev1.PodRunning, StartTime: &started,
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: started}},
		ContainerStatuses: []corev1.ContainerStatus{{Name: "main", Ready: true,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}}}},
	}
	s := NewAPISync(nil, statusStore{"u-1": local}, apiCache{client}, notify.NewSet[types.UID](), clocktesting.NewFakeClock(started.Time), quiet)
	patches := func() int { return countVerb(client, "patch") }
	ctx := context.Background()
	s.sync(ctx, client, "u-1")
	if patches() != 1 {
		t.Fatalf("%d patches for a new status, want 1", patches())
	}
	stored, _ := apiCache{client}.Pod("default", "p")
	if stored.Status.Phase != corev1.PodRunning || stored.Status.ContainerStatuses[0].State.Running == nil {
		t.Fatalf("stored status %+v", stored.Status)
	}
	for range 3 { // resyncs
		s.sync(ctx, client, "u-1")
	}
	if patches() != 1 {
		t.Errorf("%d patches after resyncs of an unchanged status, want 1: the API's seconds were taken for a change", patches())
	}
	local.Status.Phase = corev1.PodSucceeded
	s.sync(ctx, client, "u-1")
	if patches() != 2 {
		t.Errorf("%d patches after a change, want 2", patches())
	}
}

// A gone pod's last status reaches the API server before the pod is
// deleted there: with a finalizer the object stays, and what the API shows
// is the terminal status, not the last running one.
func TestStatusSyncWritesTheFinalStatusBeforeDeleting(t *testing.T) {
	deleted := metav1.NewTime(time.Date(2026, 11, 24, 4, 0, 0, 0, time.UTC))
	apiPod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: "u-1", DeletionTimestamp: &deleted,
		Annotations: map[string]string{manifest.AnnotationConfigSource: source.SourceAPI}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	client := fake.NewSimpleClientset(apiPod)
	s := NewAPISync(nil, statusStore{}, apiCache{client}, notify.NewSet[types.UID](), clocktesting.NewFakeClock(deleted.Time), quiet)
	final := apiPod.DeepCopy()
	final.Status = corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{{Name: "main",
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 143, Reason: "Error"}}}}}
	s.Gone(final)
	for _, k := range s.gone.Take() {
		s.delete(context.Background(), client, k)
	}
	var verbs []string
	for _, a := range client.Actions() {
		if a.GetVerb() != "get" {
			verbs = append(verbs, a.GetVerb()+" "+a.GetSubresource())
		}
	}
	if strings.Join(verbs, ",") != "patch status,delete " {
		t.Fatalf("actions %q, want the status patch, then the delete", verbs)
	}
	if len(s.finals) != 0 {
		t.Errorf("the final status is kept after the delete: %v", s.finals)
	}
}

// Only the static pod of the mirror's hash writes its status there: an
// edited pod waits for its own mirror while the old pod stops.
func TestOnlyTheMirrorsStaticPodWritesItsStatus(t *testing.T) {
	edited := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-n", Namespace: "default", UID: "new-uid",
		Annotations: map[string]string{manifest.AnnotationConfigHash: "h2"}}}
	mirror := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-n", Namespace: "default", UID: "mirror-1",
		Annotations: map[string]string{source.AnnotationMirror: "h1"}}}
	client := fake.NewSimpleClientset(mirror)
	s := NewAPISync(nil, statusStore{}, apiCache{client}, notify.NewSet[types.UID](), clocktesting.NewFakeClock(time.Now()), quiet)
	if _, ok := s.target(edited); ok {
		t.Error("the edited pod (h2) would write its status to the h1 mirror")
	}
	old := edited.DeepCopy()
	old.UID, old.Annotations[manifest.AnnotationConfigHash] = "old-uid", "h1"
	if _, ok := s.target(old); !ok {
		t.Error("the old pod (h1) cannot write to its own mirror")
	}
}
