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
	local := n.apiPodOnNode(pod.Name)
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
	if p := n.apiPodOnNode(pod.Name); p.Status.Phase != corev1.PodRunning {
		t.Errorf("the refused pod is %s", p.Status.Phase)
	}
}

// apiPodOnNode is the agent's own view of an API pod (its /pods).
func (n *node) apiPodOnNode(name string) *corev1.Pod {
	n.t.Helper()
	pods, err := n.pods()
	if err != nil {
		n.t.Fatal(err)
	}
	for i := range pods {
		if pods[i].Name == name {
			return &pods[i]
		}
	}
	n.t.Fatalf("pod %s not listed by the agent", name)
	return nil
}

// procField reads one counter of /proc/<pid>/<file> ("VmRSS:" in status,
// "wchar:" in io), in bytes.
func procField(t *testing.T, pid int, file, field string) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, file))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field); ok {
			var n int64
			fmt.Sscan(strings.TrimSpace(v), &n)
			if strings.HasSuffix(v, "kB") {
				n <<= 10
			}
			return n
		}
	}
	t.Fatalf("no %s in /proc/%d/%s", field, pid, file)
	return 0
}

// A pod author projects one 900 KiB configMap key under 3,000 paths: 2.6
// GiB from a 100 KB pod spec. The volume is refused with FailedMount
// naming it and its size, nothing is written, and the agent's memory and
// writes stay flat while the pod is retried.
func TestClusterAmplifiedProjectedVolumeIsRefused(t *testing.T) {
	n, cp := clusterNode(t, "")
	n.start()
	ctx := context.Background()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "big-" + randomHex(3), Namespace: "default"}, Data: map[string]string{"k": strings.Repeat("x", 900<<10)}}
	if _, err := cp.Client.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cp.Client.CoreV1().ConfigMaps("default").Delete(context.Background(), cm.Name, metav1.DeleteOptions{})
	})
	var items []corev1.KeyToPath
	for i := range 3000 {
		items = append(items, corev1.KeyToPath{Key: "k", Path: fmt.Sprintf("copies/%d", i)})
	}
	pod := apiPod("amplified-"+randomHex(3), n.name, func(p *corev1.Pod) {
		p.Spec.Volumes = []corev1.Volume{{Name: "bomb", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: cm.Name}, Items: items}}}}}}}
		p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "bomb", MountPath: "/bomb"}}
	})
	created, err := cp.Client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.eventually("a FailedMount event naming the volume and its size", time.Minute, func() error {
		evs, err := cp.Client.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.uid=" + string(created.UID)})
		if err != nil {
			return err
		}
		for _, e := range evs.Items {
			if e.Reason == "FailedMount" && strings.Contains(e.Message, `volume "bomb"`) && strings.Contains(e.Message, "2.6GiB in 3000 files") {
				return nil
			}
		}
		return fmt.Errorf("events: %v", evs.Items)
	})
	pid := n.pid()
	rss0, wrote0 := procField(t, pid, "status", "VmRSS:"), procField(t, pid, "io", "wchar:")
	time.Sleep(20 * time.Second) // retries at 0.5, 1, 2, 4, 8 s ... of back-off
	rss1, wrote1 := procField(t, pid, "status", "VmRSS:"), procField(t, pid, "io", "wchar:")
	t.Logf("agent while the pod is retried: RSS %d -> %d MiB, %d KiB written", rss0>>20, rss1>>20, (wrote1-wrote0)>>10)
	if rss1-rss0 > 32<<20 {
		t.Errorf("the agent's RSS grew by %d MiB while the refused pod was retried", (rss1-rss0)>>20)
	}
	if wrote1-wrote0 > 16<<20 {
		t.Errorf("the agent wrote %d MiB while the refused pod was retried", (wrote1-wrote0)>>20)
	}
	var written int64
	filepath.Walk(filepath.Join(n.agent.RootDir, "pods", string(created.UID)), func(_ string, info os.FileInfo, err error) error {
		if err == nil && info.Mode().IsRegular() {
			written += info.Size()
		}
		return nil
	})
	if written > 0 {
		t.Errorf("%d bytes of the refused volume are on disk", written)
	}
	p, err := cp.Client.CoreV1().Pods("default").Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Status.Phase != corev1.PodPending || len(p.Status.ContainerStatuses) != 1 || p.Status.ContainerStatuses[0].State.Waiting == nil {
		t.Errorf("status %+v: want Pending, the container waiting", p.Status)
	}
}
