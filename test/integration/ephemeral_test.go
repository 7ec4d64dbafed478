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
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"
)

// ephemeralLimit is a container's ephemeral-storage limit, as scriptPod's
// extra fields.
func ephemeralLimit(q string) string {
	return fmt.Sprintf("    resources: {limits: {ephemeral-storage: %s}}\n", q)
}

const fillThenIdle = "; while true; do sleep 1 & wait $!; done"

// TestEphemeralStorageLimitsAreEnforced: on the real node, a pod over its
// ephemeral-storage limit through an emptyDir, and a container over its
// own through its writable layer, are evicted with the kubelet's
// messages; a pod within its limit stays.
func TestEphemeralStorageLimitsAreEnforced(t *testing.T) {
	n := newNode(t, "")
	n.writeManifest("volume.yaml", scriptPod("volume", "", "dd if=/dev/zero of=/state/fill bs=1M count=30"+fillThenIdle, ephemeralLimit("10Mi")))
	// The pod's limit (110Mi) holds; the writer's own (10Mi) does not.
	idle := fmt.Sprintf("  - name: idle\n    image: %s\n    command: [sh, -c, %q]\n%s", testImage, "while true; do sleep 1 & wait $!; done", ephemeralLimit("100Mi"))
	n.writeManifest("layer.yaml", scriptPod("layer", "", "dd if=/dev/zero of=/tmp/fill bs=1M count=30"+fillThenIdle, ephemeralLimit("10Mi")+idle))
	n.writeManifest("within.yaml", scriptPod("within", "", "dd if=/dev/zero of=/tmp/fill bs=1M count=5"+fillThenIdle, ephemeralLimit("50Mi")))
	n.start()
	if p := n.waitEvicted("volume"); p.Status.Message != "Pod ephemeral local storage usage exceeds the total limit of containers 10Mi. " {
		t.Errorf("the pod over its limit: message %q", p.Status.Message)
	}
	if p := n.waitEvicted("layer"); p.Status.Message != `Container main exceeded its local ephemeral storage limit "10Mi". ` {
		t.Errorf("the container over its limit: message %q", p.Status.Message)
	}
	if w := n.mustPod("within"); w.Status.Phase != corev1.PodRunning {
		t.Errorf("the pod within its limit: %s %s", w.Status.Phase, w.Status.Message)
	}
	if c := n.condition(corev1.NodeDiskPressure); c.Status != corev1.ConditionFalse {
		t.Errorf("a pod over its own limit is no node pressure: %+v", c)
	}
}

// TestClusterEvictedPodStaysDownAfterAgentRestart: a pod evicted (Failed,
// restartPolicy Always) whose exited containers are still on the node is
// not started again by a restarted agent, which adopts it as finished.
func TestClusterEvictedPodStaysDownAfterAgentRestart(t *testing.T) {
	n, cp := clusterNode(t, "")
	n.start()
	ctx := context.Background()
	limit := resource.MustParse("5Mi")
	pod := apiPod("evicted-"+randomHex(3), n.name, func(p *corev1.Pod) {
		p.Spec.Volumes = []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: &limit}}}}
		c := &p.Spec.Containers[0]
		c.VolumeMounts = []corev1.VolumeMount{{Name: "scratch", MountPath: "/data"}}
		c.Command = []string{"sh", "-c", "dd if=/dev/zero of=/data/fill bs=1M count=20" + fillThenIdle}
	})
	if _, err := cp.Client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cp.Client.CoreV1().Pods("default").Delete(context.Background(), pod.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
	})
	evicted := cp.waitAPIPod(t, "default", pod.Name, 90*time.Second, "evicted", func(p *corev1.Pod) error {
		if p.Status.Phase != corev1.PodFailed || p.Status.Reason != "Evicted" {
			return fmt.Errorf("phase %q reason %q", p.Status.Phase, p.Status.Reason)
		}
		return nil
	})
	sandboxes, containers := n.runtimeObjects(string(evicted.UID))
	if len(containers) == 0 {
		t.Fatal("the evicted pod's exited container is gone from the runtime: the restart would prove nothing")
	}
	if err := n.stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	n.start()
	// The restarted agent lists the pod (from the API), then would start
	// it within a sync or two: give it several.
	n.eventually("the restarted agent lists the evicted pod", time.Minute, func() error {
		pods, err := n.pods()
		if err != nil {
			return err
		}
		for _, p := range pods {
			if p.UID == evicted.UID {
				return nil
			}
		}
		return fmt.Errorf("not among %d pods", len(pods))
	})
	time.Sleep(10 * time.Second)
	sbAfter, csAfter := n.runtimeObjects(string(evicted.UID))
	for _, c := range csAfter {
		if c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
			t.Errorf("container %s of the evicted pod runs again", c.Metadata.Name)
		}
	}
	if len(sbAfter) > len(sandboxes) || len(csAfter) > len(containers) {
		t.Errorf("after the restart: %d sandboxes and %d containers, before %d and %d", len(sbAfter), len(csAfter), len(sandboxes), len(containers))
	}
	p, err := cp.Client.CoreV1().Pods("default").Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Status.Phase != corev1.PodFailed || p.Status.Reason != "Evicted" {
		t.Errorf("after the restart: phase %q reason %q message %q", p.Status.Phase, p.Status.Reason, p.Status.Message)
	}
}
