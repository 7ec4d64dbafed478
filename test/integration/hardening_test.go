//go:build integration

package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"nodeagent/api"
)

// A pod author names a host file in the annotation the agent keeps for
// static pods' manifests; the operator then deletes the misbehaving pod
// with nodectl. The file survives: the annotation never reaches the agent,
// and nodectl refuses the API pod, pointing at kubectl delete.
func TestClusterPodAuthorCannotAimNodectlDeleteAtAHostFile(t *testing.T) {
	n, cp := clusterNode(t, "")
	n.start()
	victim := filepath.Join(t.TempDir(), "etcd.yaml")
	if err := os.WriteFile(victim, []byte("kind: Pod\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	pod := apiPod("aimed-"+randomHex(3), n.name, func(p *corev1.Pod) {
		p.Annotations = map[string]string{api.AnnotationManifest: victim, "kubernetes.io/config.source": "file"}
	})
	ctx := context.Background()
	if _, err := cp.Client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cp.waitAPIPod(t, "default", pod.Name, time.Minute, "Running", func(p *corev1.Pod) error {
		if p.Status.Phase != corev1.PodRunning {
			return fmt.Errorf("phase %s", p.Status.Phase)
		}
		return nil
	})
	local, err := n.pod(pod.Name)
	if err != nil {
		t.Fatal(err)
	}
	if f, ok := local.Annotations[api.AnnotationManifest]; ok || local.Annotations["kubernetes.io/config.source"] != "api" {
		t.Errorf("the agent's pod carries manifest %q and source %q: want no manifest and source api", f, local.Annotations["kubernetes.io/config.source"])
	}
	out, err := n.nodectl("delete", "pod", pod.Name)
	if err == nil {
		t.Errorf("nodectl delete of an API pod succeeded: %s", out)
	}
	if !strings.Contains(out, "kubectl delete") || strings.Count(strings.TrimSpace(out), "\n") > 0 {
		t.Errorf("nodectl delete said %q: want one line pointing at kubectl delete", out)
	}
	if _, err := os.Stat(victim); err != nil {
		t.Fatalf("the host file the annotation named: %v", err)
	}
	if p, err := n.pod(pod.Name); err != nil || p.Status.Phase != corev1.PodRunning {
		t.Errorf("the refused pod: %v, %v", p, err)
	}
}
