//go:build integration

package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"nodeagent/internal/mounts"
)

// Mount propagation through an emptyDir (what the upstream recursive
// read-only specs lean on): the agent puts its root directory on a shared
// mount, as the kubelet does, so the runtime accepts a Bidirectional
// volume; a tmpfs a privileged container mounts in it reaches the host
// and a HostToContainer view in the pod's other container, and goes with
// the pod.
func TestBidirectionalMountPropagation(t *testing.T) {
	n := newNode(t, "")
	n.writeManifest("prop.yaml", fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: propagation
spec:
  terminationGracePeriodSeconds: 1
  volumes: [{name: shared, emptyDir: {}}]
  containers:
  - name: mounter
    image: %s
    securityContext: {privileged: true}
    command: ["sh", "-c", "mkdir -p /mnt/tmpfs && mount -t tmpfs none /mnt/tmpfs && echo from-mounter > /mnt/tmpfs/f && exec sleep 3600"]
    volumeMounts: [{name: shared, mountPath: /mnt, mountPropagation: Bidirectional}]
  - name: viewer
    image: %[1]s
    command: ["sleep", "3600"]
    volumeMounts: [{name: shared, mountPath: /view, mountPropagation: HostToContainer}]
`, testImage))
	n.start()
	if shared, err := mounts.OnSharedMount(n.agent.RootDir); err != nil || !shared {
		t.Errorf("the root directory %s is not on a shared mount (%v)", n.agent.RootDir, err)
	}
	p := n.waitRunning("propagation")
	onHost := filepath.Join(n.agent.RootDir, "pods", string(p.UID), "volumes", "kubernetes.io~empty-dir", "shared", "tmpfs")
	n.eventually("the container's tmpfs is seen by the host and the other container", 30*time.Second, func() error {
		if b, err := os.ReadFile(filepath.Join(onHost, "f")); err != nil || string(b) != "from-mounter\n" {
			return fmt.Errorf("host reads %q, %v", b, err)
		}
		if out, _ := n.execIn(p, "viewer", "cat", "/view/tmpfs/f"); out != "from-mounter\n" {
			return fmt.Errorf("viewer reads %q", out)
		}
		return nil
	})
	n.removeManifest("prop.yaml")
	n.waitGone("propagation")
	n.eventually("the pod's mounts gone from the host", 30*time.Second, func() error {
		if m := mountsUnder(t, filepath.Join(n.agent.RootDir, "pods")); len(m) > 0 {
			return fmt.Errorf("still mounted: %v", m)
		}
		return nil
	})
}
