package node

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
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"
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
	s := NewAPISync(client, "n1", ObjectOptions{Register: true, Labels: map[string]string{"example.com/a": "b"}, ReportFrequency: time.Minute, MaxImages: 1, KubeletPort: 10250},
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
	s := NewAPISync(fake.NewClientset(), "n1", ObjectOptions{Register: false},
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

// What others put in the Node's status survives the agent's patches:
// an extended resource advertised through the API, another component's
// condition, the attach/detach controller's volumes. A device plugin's
// resource the agent published goes when the plugin does.
func TestNodeStatusKeepsWhatOthersOwn(t *testing.T) {
	client := fake.NewClientset()
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	ready, gpu := corev1.ConditionTrue, true
	s := NewAPISync(client, "n1", ObjectOptions{Register: true, ReportFrequency: time.Minute},
		func(now time.Time) *corev1.Node {
			n := agentNode(now, ready)
			if gpu {
				n.Status.Capacity["vendor.example/gpu"] = resource.MustParse("1")
			}
			return n
		}, nil, clk, quiet)
	ctx := context.Background()
	if err := s.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	n, err := client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Status.Capacity["example.com/dongle"] = resource.MustParse("4")
	n.Status.Allocatable = corev1.ResourceList{"example.com/dongle": resource.MustParse("4")}
	n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: "KernelDeadlock", Status: corev1.ConditionFalse, Reason: "KernelHasNoDeadlock"})
	n.Status.VolumesAttached = []corev1.AttachedVolume{{Name: "kubernetes.io/csi/x^vol", DevicePath: "/dev/x"}}
	if _, err := client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, change := range []func(){func() { ready = corev1.ConditionFalse }, func() { gpu = false }} {
		change()
		clk.Step(10 * time.Second)
		if err := s.Sync(ctx); err != nil {
			t.Fatal(err)
		}
	}
	n, _ = client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	if q, ok := n.Status.Capacity["example.com/dongle"]; !ok || q.Value() != 4 {
		t.Errorf("capacity %v: the extended resource added through the API was removed", n.Status.Capacity)
	}
	if q, ok := n.Status.Allocatable["example.com/dongle"]; !ok || q.Value() != 4 {
		t.Errorf("allocatable %v: the extended resource added through the API was removed", n.Status.Allocatable)
	}
	if _, ok := n.Status.Capacity["vendor.example/gpu"]; ok {
		t.Errorf("capacity %v: the device plugin's resource outlived the plugin", n.Status.Capacity)
	}
	var types []string
	for _, c := range n.Status.Conditions {
		types = append(types, string(c.Type))
		if c.Type == corev1.NodeReady && c.Status != corev1.ConditionFalse {
			t.Errorf("Ready %s, want the agent's False", c.Status)
		}
	}
	if strings.Join(types, ",") != "Ready,KernelDeadlock" {
		t.Errorf("conditions %v, want the agent's Ready and the other component's KernelDeadlock", types)
	}
	if len(n.Status.VolumesAttached) != 1 {
		t.Errorf("volumesAttached %v, want the controller's volume kept", n.Status.VolumesAttached)
	}
}
