//go:build integration

package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// hostPath types on the real node, as kube-proxy and node daemons use
// them: FileOrCreate makes a file (never a directory) that the container
// and the host share; Directory on a missing path holds the pod back with
// the kubelet's FailedMount until the directory exists. The pod's volumes
// are set up before its sandbox: no sandbox exists while one fails.
func TestHostPathTypesOnTheNode(t *testing.T) {
	n := newNode(t, "")
	host := t.TempDir()
	lock := filepath.Join(host, "xtables.lock")
	later := filepath.Join(host, "later")
	n.writeManifest("hostpath.yaml", fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: hostpath
spec:
  terminationGracePeriodSeconds: 2
  volumes:
  - name: lock
    hostPath: {path: %s, type: FileOrCreate}
  - name: later
    hostPath: {path: %s, type: Directory}
  containers:
  - name: main
    image: %s
    command: ["sh", "-c", "echo from-pod > /run/xtables.lock; echo in-dir > /later/f; exec sleep 3600"]
    volumeMounts:
    - {name: lock, mountPath: /run/xtables.lock}
    - {name: later, mountPath: /later}
`, lock, later, testImage))
	n.start()

	var uid string
	n.waitPod("hostpath", 30*time.Second, "FailedMount for the missing directory", func(p *corev1.Pod) error {
		if p == nil {
			return fmt.Errorf("no pod")
		}
		uid = string(p.UID)
		want := `MountVolume.SetUp failed for volume "later" : hostPath type check failed, ` + later + ` is not a directory, unable to determine its type: path "` + later + `" does not exist`
		for _, e := range n.events(uid) {
			if e.Reason == "FailedMount" && e.Message == want {
				return nil
			}
		}
		return fmt.Errorf("events %v", n.events(uid))
	})
	if st, err := os.Stat(lock); err != nil || !st.Mode().IsRegular() {
		t.Fatalf("FileOrCreate: %v %v, want a regular file made before the pod started", st, err)
	}
	if sbs, cs := n.runtimeObjects(uid); len(sbs)+len(cs) > 0 {
		t.Errorf("a pod whose volume failed has %d sandboxes and %d containers: volumes come first", len(sbs), len(cs))
	}

	if err := os.Mkdir(later, 0o755); err != nil {
		t.Fatal(err)
	}
	n.waitRunning("hostpath")
	n.eventually("the container's writes on the host", 30*time.Second, func() error {
		a, _ := os.ReadFile(lock)
		b, _ := os.ReadFile(filepath.Join(later, "f"))
		if strings.TrimSpace(string(a)) != "from-pod" || strings.TrimSpace(string(b)) != "in-dir" {
			return fmt.Errorf("lock %q, later/f %q", a, b)
		}
		return nil
	})

	n.removeManifest("hostpath.yaml")
	n.waitGone("hostpath")
	if _, err := os.Stat(lock); err != nil {
		t.Errorf("the pod's end removed its hostPath file: %v", err)
	}
	if _, err := os.Stat(filepath.Join(later, "f")); err != nil {
		t.Errorf("the pod's end removed its hostPath directory's file: %v", err)
	}
}
