//go:build integration

package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// An extended resource advertised through the API (the documented way:
// a patch of the Node's status) and another component's condition
// survive the agent's status reports, as they do the kubelet's.
func TestClusterExtendedResourceSurvivesStatusUpdates(t *testing.T) {
	n, cp := clusterNode(t, "nodeStatusReportFrequency: 2s\n")
	n.start()
	ctx := context.Background()
	nodes := cp.Client.CoreV1().Nodes()
	n.eventually("the Node is registered", 30*time.Second, func() error {
		_, err := nodes.Get(ctx, n.name, metav1.GetOptions{})
		return err
	})
	patch := `{"status":{"capacity":{"example.com/dongle":"4"},"allocatable":{"example.com/dongle":"4"},` +
		`"conditions":[{"type":"KernelDeadlock","status":"False","reason":"KernelHasNoDeadlock"}]}}`
	if _, err := nodes.PatchStatus(ctx, n.name, []byte(patch)); err != nil {
		t.Fatal(err)
	}
	added := time.Now()
	heartbeat := func(node *corev1.Node) time.Time {
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady {
				return c.LastHeartbeatTime.Time
			}
		}
		return time.Time{}
	}
	// Two reports later (heartbeats are in seconds).
	n.eventually("two status reports after the patch", 30*time.Second, func() error {
		node, err := nodes.Get(ctx, n.name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if hb := heartbeat(node); !hb.After(added.Add(3 * time.Second)) {
			return fmt.Errorf("last heartbeat %v, patched at %v", hb, added)
		}
		return nil
	})
	node, err := nodes.Get(ctx, n.name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for name, l := range map[string]corev1.ResourceList{"capacity": node.Status.Capacity, "allocatable": node.Status.Allocatable} {
		if q, ok := l["example.com/dongle"]; !ok || q.Cmp(resource.MustParse("4")) != 0 {
			t.Errorf("%s %v: the extended resource added through the API is gone", name, l)
		}
	}
	found := false
	for _, c := range node.Status.Conditions {
		found = found || c.Type == "KernelDeadlock"
	}
	if !found {
		t.Errorf("conditions %v: the other component's KernelDeadlock is gone", node.Status.Conditions)
	}
}
