//go:build integration

package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A pod bound to the node by name that needs a node feature the node does
// not declare (a RestartAllContainers rule; the node's declaredFeatures
// do not list RestartAllContainersOnContainerExits) is refused as the
// kubelet refuses it: Failed, PodFeatureUnsupported, and nothing runs.
func TestClusterPodNeedingAnUndeclaredFeatureIsRefused(t *testing.T) {
	n, cp := clusterNode(t, "")
	n.start()
	ctx := context.Background()
	n.eventually("the Node is registered", 30*time.Second, func() error {
		node, err := cp.Client.CoreV1().Nodes().Get(ctx, n.name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, f := range node.Status.DeclaredFeatures {
			if f == "RestartAllContainersOnContainerExits" {
				t.Fatalf("the node declares %s, which the agent does not implement", f)
			}
		}
		return nil
	})
	never := corev1.ContainerRestartPolicyNever
	pod := apiPod("restart-all-"+randomHex(3), n.name, func(p *corev1.Pod) {
		p.Spec.Containers[0].RestartPolicy = &never
		p.Spec.Containers[0].RestartPolicyRules = []corev1.ContainerRestartRule{{
			Action:    corev1.ContainerRestartRuleActionRestartAllContainers,
			ExitCodes: &corev1.ContainerRestartRuleOnExitCodes{Operator: corev1.ContainerRestartRuleOnExitCodesOpIn, Values: []int32{42}},
		}}
	})
	if _, err := cp.Client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cp.waitAPIPod(t, "default", pod.Name, time.Minute, "refused with PodFeatureUnsupported", func(p *corev1.Pod) error {
		if p.Status.Phase != corev1.PodFailed || p.Status.Reason != "PodFeatureUnsupported" ||
			!strings.Contains(p.Status.Message, "Pod requires node features that are not available: RestartAllContainersOnContainerExits") {
			return fmt.Errorf("phase %s, reason %q, message %q", p.Status.Phase, p.Status.Reason, p.Status.Message)
		}
		return nil
	})
	if sandboxes, _ := n.runtimeObjects(string(pod.UID)); len(sandboxes) != 0 {
		t.Errorf("a refused pod got %d sandboxes", len(sandboxes))
	}
}
