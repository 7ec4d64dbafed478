package cluster

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"

	"nodeagent/agent/source"
	"nodeagent/internal/notify"
	"nodeagent/manifest"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func agentNode(now time.Time, ready corev1.ConditionStatus) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"kubernetes.io/hostname": "n1"}},
		Status: corev1.NodeStatus{
			Capacity:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")},
			Addresses:  []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.1"}, {Type: corev1.NodeHostName, Address: "n1"}},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready, LastHeartbeatTime: metav1.NewTime(now)}},
		},
	}
}

func TestNodeSyncRegistersPatchesOnlyChangesAndReregisters(t *testing.T) {
	client := fake.NewClientset()
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	ready := corev1.ConditionTrue
	listings := 0
	s := NewNodeSync(client, "n1", NodeOptions{Register: true, Labels: map[string]string{"example.com/a": "b"}, ReportFrequency: time.Minute, MaxImages: 1, KubeletPort: 10250},
		func(now time.Time) *corev1.Node { return agentNode(now, ready) },
		func(context.Context) ([]corev1.ContainerImage, error) {
			listings++
			return []corev1.ContainerImage{{Names: []string{"small"}, SizeBytes: 1}, {Names: []string{"big"}, SizeBytes: 9}}, nil
		}, clk, quiet)
	ctx := context.Background()
	if err := s.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if listings != 1 {
		t.Errorf("the runtime's images listed %d times by one sync that registered, want 1", listings)
	}
	n, err := client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n.Labels["example.com/a"] != "b" || n.Status.DaemonEndpoints.KubeletEndpoint.Port != 10250 {
		t.Errorf("registered node %+v", n)
	}
	if len(n.Status.Images) != 1 || n.Status.Images[0].Names[0] != "big" {
		t.Errorf("images %+v, want only the largest", n.Status.Images)
	}

	patches := func() int { return countVerb(client, "patch") }
	before := patches()
	clk.Step(10 * time.Second)
	if err := s.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if patches() != before {
		t.Error("an unchanged status was sent before the report period")
	}
	ready = corev1.ConditionFalse
	clk.Step(10 * time.Second)
	if err := s.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if patches() != before+1 {
		t.Fatalf("a changed status was not sent (%d patches)", patches()-before)
	}
	n, _ = client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	if c := n.Status.Conditions; len(c) != 1 || c[0].Status != corev1.ConditionFalse {
		t.Errorf("conditions after the patch %+v", c)
	}
	clk.Step(2 * time.Minute)
	if err := s.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if patches() != before+2 {
		t.Error("the status was not sent once the report period ran out")
	}

	// Deleted: registered again.
	if err := client.CoreV1().Nodes().Delete(ctx, "n1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := s.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{}); err != nil {
		t.Errorf("the deleted Node was not registered again: %v", err)
	}
}

func TestNodeSyncWithoutRegisterNeedsTheNode(t *testing.T) {
	s := NewNodeSync(fake.NewClientset(), "n1", NodeOptions{Register: false},
		func(now time.Time) *corev1.Node { return agentNode(now, corev1.ConditionTrue) }, nil, clocktesting.NewFakeClock(time.Now()), quiet)
	err := s.Sync(context.Background())
	if err == nil || !strings.Contains(err.Error(), "registerNode is false") {
		t.Errorf("err = %v", err)
	}
}

func TestNodeStatusPatchReplacesAddresses(t *testing.T) {
	cur := agentNode(time.Unix(0, 0), corev1.ConditionTrue)
	want := cur.Status.DeepCopy()
	want.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.2"}, {Type: corev1.NodeHostName, Address: "n1"}}
	patch, err := nodeStatusPatch(cur, *want)
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Status struct {
			Addresses []map[string]string `json:"addresses"`
		} `json:"status"`
	}
	if err := json.Unmarshal(patch, &m); err != nil {
		t.Fatal(err)
	}
	a := m.Status.Addresses
	if len(a) != 3 || a[0]["address"] != "10.0.0.2" || a[2]["$patch"] != "replace" {
		t.Errorf("addresses in the patch %v (%s)", a, patch)
	}
}

func TestMergeStatusKeepsOthersConditionsAndHonoursReadinessGates(t *testing.T) {
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
	}}
	got := mergeStatus(api, local)
	byType := map[corev1.PodConditionType]corev1.PodCondition{}
	for _, c := range got.Conditions {
		byType[c.Type] = c
	}
	if byType[corev1.PodScheduled].Reason != "by-scheduler" {
		t.Errorf("PodScheduled not kept from the API: %+v", got.Conditions)
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

// statusStore is a LocalStatus of fixed pods.
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
	s := NewStatusSync(nil, statusStore{"u-1": local}, apiCache{client}, notify.NewSet[types.UID](), clocktesting.NewFakeClock(started.Time), quiet)
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
	s := NewStatusSync(nil, statusStore{}, apiCache{client}, notify.NewSet[types.UID](), clocktesting.NewFakeClock(deleted.Time), quiet)
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

// mirrorCache is the API source's view of mirror pods, read from the fake.
type mirrorCache struct{ apiCache }

func (c mirrorCache) Mirrors() []*corev1.Pod {
	list, _ := c.client.CoreV1().Pods("").List(context.Background(), metav1.ListOptions{})
	var out []*corev1.Pod
	for i := range list.Items {
		if _, ok := list.Items[i].Annotations[source.AnnotationMirror]; ok {
			out = append(out, &list.Items[i])
		}
	}
	return out
}

// A mirror pod deleted gracefully is finished off and made again, and one
// whose static pod is gone is deleted even while it is being deleted: the
// API server waits for the node either way.
func TestMirrorsFinishGracefulDeletions(t *testing.T) {
	now := metav1.Now()
	static := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-n", Namespace: "default", UID: "static-uid",
		Annotations: map[string]string{manifest.AnnotationConfigHash: "h1", manifest.AnnotationManifest: "/etc/nodeagent/manifests/web.yaml"}}}
	deleting := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-n", Namespace: "default", UID: "mirror-1", DeletionTimestamp: &now,
		Annotations: map[string]string{source.AnnotationMirror: "h1"}}}
	orphan := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "old-n", Namespace: "default", UID: "mirror-2", DeletionTimestamp: &now,
		Annotations: map[string]string{source.AnnotationMirror: "h0"}}}
	client := fake.NewSimpleClientset(deleting, orphan)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", UID: "node-uid"}}
	m := NewMirrors(nil, mirrorCache{apiCache{client}}, func() *corev1.Node { return node }, clocktesting.NewFakeClock(now.Time), quiet)
	m.SetStatic([]*corev1.Pod{static})
	m.sync(context.Background(), client)

	if _, err := client.CoreV1().Pods("default").Get(context.Background(), "old-n", metav1.GetOptions{}); err == nil {
		t.Error("the orphaned mirror pod being deleted is still there")
	}
	got, err := client.CoreV1().Pods("default").Get(context.Background(), "web-n", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the gracefully deleted mirror pod was not made again: %v", err)
	}
	if got.UID == "mirror-1" || got.DeletionTimestamp != nil || got.Annotations[source.AnnotationMirror] != "h1" {
		t.Errorf("mirror pod %s deleting %v hash %q: want a new one with hash h1", got.UID, got.DeletionTimestamp, got.Annotations[source.AnnotationMirror])
	}
	if f, ok := got.Annotations[manifest.AnnotationManifest]; ok || got.Annotations[manifest.AnnotationConfigHash] != "h1" {
		t.Errorf("mirror annotations %v: want the static pod's hash and no host path (%q)", got.Annotations, f)
	}
}

// An edited static pod's old mirror stays while the old pod stops, and only
// the static pod of the mirror's hash writes its status there.
func TestEditedStaticPodKeepsItsMirrorWhileTheOldPodStops(t *testing.T) {
	now := metav1.Now()
	edited := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-n", Namespace: "default", UID: "new-uid",
		Annotations: map[string]string{manifest.AnnotationConfigHash: "h2"}}}
	mirror := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-n", Namespace: "default", UID: "mirror-1",
		Annotations: map[string]string{source.AnnotationMirror: "h1"}}}
	client := fake.NewSimpleClientset(mirror)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", UID: "node-uid"}}
	m := NewMirrors(nil, mirrorCache{apiCache{client}}, func() *corev1.Node { return node }, clocktesting.NewFakeClock(now.Time), quiet)
	stopping := true
	m.Terminating = func(ns, name string) bool { return stopping && ns == "default" && name == "web-n" }
	m.SetStatic([]*corev1.Pod{edited})
	m.sync(context.Background(), client)
	if got, err := client.CoreV1().Pods("default").Get(context.Background(), "web-n", metav1.GetOptions{}); err != nil || got.UID != "mirror-1" {
		t.Fatalf("while the old pod stops the old mirror must stay: %v %v", got, err)
	}

	s := NewStatusSync(nil, statusStore{}, apiCache{client}, notify.NewSet[types.UID](), clocktesting.NewFakeClock(now.Time), quiet)
	if _, ok := s.target(edited); ok {
		t.Error("the edited pod (h2) would write its status to the h1 mirror")
	}
	old := edited.DeepCopy()
	old.UID, old.Annotations[manifest.AnnotationConfigHash] = "old-uid", "h1"
	if _, ok := s.target(old); !ok {
		t.Error("the old pod (h1) cannot write to its own mirror")
	}

	stopping = false
	m.sync(context.Background(), client)
	if got, err := client.CoreV1().Pods("default").Get(context.Background(), "web-n", metav1.GetOptions{}); err == nil && got.UID == "mirror-1" {
		t.Error("once the old pod is gone the old mirror must go")
	}
}

// A removed static pod's mirror stays while the pod stops.
func TestRemovedStaticPodKeepsItsMirrorWhileItStops(t *testing.T) {
	mirror := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-n", Namespace: "default", UID: "mirror-1",
		Annotations: map[string]string{source.AnnotationMirror: "h1"}}}
	client := fake.NewSimpleClientset(mirror)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", UID: "node-uid"}}
	m := NewMirrors(nil, mirrorCache{apiCache{client}}, func() *corev1.Node { return node }, clocktesting.NewFakeClock(time.Now()), quiet)
	stopping := true
	m.Terminating = func(string, string) bool { return stopping }
	m.SetStatic(nil)
	m.sync(context.Background(), client)
	if _, err := client.CoreV1().Pods("default").Get(context.Background(), "web-n", metav1.GetOptions{}); err != nil {
		t.Fatalf("the mirror went while its pod stops: %v", err)
	}
	stopping = false
	m.sync(context.Background(), client)
	if _, err := client.CoreV1().Pods("default").Get(context.Background(), "web-n", metav1.GetOptions{}); err == nil {
		t.Error("the mirror stayed after its pod stopped")
	}
}
