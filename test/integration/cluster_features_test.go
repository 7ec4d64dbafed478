//go:build integration

package integration

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The Node declares the features the agent implements (1.37's
// status.declaredFeatures), so the scheduler sends it pods with a
// RestartAllContainers rule, and one bound to it by name runs with its
// AllContainersRestarting condition.
func TestClusterNodeDeclaresItsFeatures(t *testing.T) {
	n, cp := clusterNode(t, "")
	n.start()
	ctx := context.Background()
	n.eventually("the Node declares RestartAllContainersOnContainerExits", 30*time.Second, func() error {
		node, err := cp.Client.CoreV1().Nodes().Get(ctx, n.name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if f := node.Status.DeclaredFeatures; !slices.Contains(f, "RestartAllContainersOnContainerExits") || slices.Contains(f, "VolumeBindMountOptions") {
			return fmt.Errorf("declaredFeatures %q", f)
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
	cp.waitAPIPod(t, "default", pod.Name, time.Minute, "running, AllContainersRestarting False", func(p *corev1.Pod) error {
		if p.Status.Phase != corev1.PodRunning {
			return fmt.Errorf("phase %s, reason %q, message %q", p.Status.Phase, p.Status.Reason, p.Status.Message)
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.AllContainersRestarting && c.Status == corev1.ConditionFalse {
				return nil
			}
		}
		return fmt.Errorf("conditions %+v", p.Status.Conditions)
	})
}

// A pod that needs a node feature the node does not declare (bind mount
// options; the node's declaredFeatures do not list VolumeBindMountOptions)
// is refused as the kubelet refuses it: Failed, PodFeatureUnsupported,
// and nothing runs. Static here: the API server drops the alpha field.
func TestPodNeedingAnUndeclaredFeatureIsRefused(t *testing.T) {
	n := newNode(t, "")
	n.writeManifest("bind.yaml", strings.Replace(podManifest("bind-options", ""), "spec:\n",
		"spec:\n  volumes: [{name: v, emptyDir: {}}]\n", 1)+"    volumeMounts: [{name: v, mountPath: /v, bindMountOptions: [nosymfollow]}]\n")
	n.start()
	p := n.waitRejected("bind-options")
	if p.Status.Reason != "PodFeatureUnsupported" || !strings.Contains(p.Status.Message, "Pod requires node features that are not available: VolumeBindMountOptions") {
		t.Errorf("reason %q, message %q", p.Status.Reason, p.Status.Message)
	}
	if sandboxes, _ := n.runtimeObjects(string(p.UID)); len(sandboxes) != 0 {
		t.Errorf("a refused pod got %d sandboxes", len(sandboxes))
	}
}
