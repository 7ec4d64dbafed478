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

// TestSubPathSymlinkSwapCannotReachTheHost is CVE-2017-1002101 as the audit
// tried it on the real runtime: a container mounts its emptyDir whole and
// a subPath of it, replaces the subPath directory with a symlink to "/"
// and exits. Restarted, it must not see the host: the agent refuses to
// follow the symlink out of the volume and the container waits with
// CreateContainerConfigError.
func TestSubPathSymlinkSwapCannotReachTheHost(t *testing.T) {
	n := newNode(t, "")
	n.start()
	// A file on the host, outside any volume: the container looks for it
	// through its subPath mount.
	secretDir, err := os.MkdirTemp("/tmp", "nodeagent-subpath-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(secretDir)
	secret := filepath.Join(secretDir, "secret")
	if err := os.WriteFile(secret, []byte("host"), 0o644); err != nil {
		t.Fatal(err)
	}
	script := fmt.Sprintf(`if [ -e /sub%[1]s ]; then echo ESCAPED >> /data/result; fi
echo run >> /data/runs
if [ ! -L /data/sub ]; then mv /data/sub /data/sub.old; ln -s / /data/sub; exit 1; fi
sleep 3600`, secret)
	n.writeManifest("swap.yaml", fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: swap}
spec:
  terminationGracePeriodSeconds: 1
  volumes: [{name: data, emptyDir: {}}]
  containers:
  - name: main
    image: %s
    command: ["sh", "-c", %q]
    volumeMounts:
    - {name: data, mountPath: /data}
    - {name: data, mountPath: /sub, subPath: sub}
`, testImage, script))

	p := n.waitPod("swap", 60*time.Second, "refused to restart through the symlink", func(p *corev1.Pod) error {
		if p == nil || len(p.Status.ContainerStatuses) == 0 {
			return fmt.Errorf("no status yet")
		}
		cs := p.Status.ContainerStatuses[0]
		if w := cs.State.Waiting; w != nil && w.Reason == "CreateContainerConfigError" {
			return nil
		}
		return fmt.Errorf("container state %+v, restarts %d", cs.State, cs.RestartCount)
	})
	msg := p.Status.ContainerStatuses[0].State.Waiting.Message
	if !strings.Contains(msg, `subPath "sub"`) || !strings.Contains(msg, "leads out of the volume") {
		t.Errorf("waiting message %q: want it to name the subPath and the symlink", msg)
	}
	volume := filepath.Join(n.dir, "root", "pods", string(p.UID), "volumes", "kubernetes.io~empty-dir", "data")
	if b, err := os.ReadFile(filepath.Join(volume, "result")); err == nil {
		t.Fatalf("the restarted container saw the host's %s through its subPath: %q", secret, b)
	}
	// It stays refused (the back-off retries resolve again each time).
	time.Sleep(3 * time.Second)
	if b, _ := os.ReadFile(filepath.Join(volume, "runs")); strings.Count(string(b), "run") != 1 {
		t.Errorf("the container ran %d times; want once (never again through the symlink)", strings.Count(string(b), "run"))
	}

	// Deleting the pod detaches the subPath bind before the pod directory
	// goes: the host file, and the volume's own content, are not touched
	// by the removal.
	n.removeManifest("swap.yaml")
	n.waitGone("swap")
	if _, err := os.Stat(secret); err != nil {
		t.Errorf("the host file is gone after the pod's cleanup: %v", err)
	}
	if left, _ := filepath.Glob(filepath.Join(n.dir, "root", "pods", string(p.UID))); len(left) != 0 {
		t.Errorf("pod directory left: %v", left)
	}
	if mounts := mountsUnder(t, filepath.Join(n.dir, "root")); len(mounts) != 0 {
		t.Errorf("mounts left under the root dir: %v", mounts)
	}
}

// TestSubPathMountsWhatItNames: a working subPath (and a subPathExpr)
// show the directory they name, created when missing, and nothing else.
func TestSubPathMountsWhatItNames(t *testing.T) {
	n := newNode(t, "")
	n.start()
	n.writeManifest("sub.yaml", fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: sub}
spec:
  terminationGracePeriodSeconds: 1
  volumes: [{name: data, emptyDir: {}}]
  initContainers:
  - name: fill
    image: %[1]s
    command: ["sh", "-c", "mkdir -p /data/a/b /data/pod-x && echo deep > /data/a/b/f && echo top > /data/top && echo expr > /data/pod-x/g"]
    volumeMounts: [{name: data, mountPath: /data}]
  containers:
  - name: main
    image: %[1]s
    env: [{name: WHICH, value: x}]
    command: ["sh", "-c", "cat /sub/f /expr/g; ls /sub /made; sleep 3600"]
    volumeMounts:
    - {name: data, mountPath: /sub, subPath: a/b, readOnly: true}
    - {name: data, mountPath: /expr, subPathExpr: pod-$(WHICH)}
    - {name: data, mountPath: /made, subPath: new/dir}
`, testImage))
	p := n.waitRunning("sub")
	logFile := filepath.Join(n.dir, "logs", fmt.Sprintf("%s_%s_%s", p.Namespace, p.Name, p.UID), "main", "0.log")
	n.eventually("the container's output", 20*time.Second, func() error {
		b, err := os.ReadFile(logFile)
		if err != nil {
			return err
		}
		for _, want := range []string{"F deep", "F expr", "F f"} {
			if !strings.Contains(string(b), want) {
				return fmt.Errorf("log %q lacks %q", b, want)
			}
		}
		if strings.Contains(string(b), "top") {
			return fmt.Errorf("the subPath shows the volume's top: %q", b)
		}
		return nil
	})
	volume := filepath.Join(n.dir, "root", "pods", string(p.UID), "volumes", "kubernetes.io~empty-dir", "data")
	if st, err := os.Stat(filepath.Join(volume, "new", "dir")); err != nil || !st.IsDir() {
		t.Errorf("a missing subPath is created as a directory: %v", err)
	}
	n.removeManifest("sub.yaml")
	n.waitGone("sub")
	if mounts := mountsUnder(t, filepath.Join(n.dir, "root")); len(mounts) != 0 {
		t.Errorf("mounts left under the root dir: %v", mounts)
	}
}

// mountsUnder lists mount points below dir.
func mountsUnder(t *testing.T, dir string) []string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], dir+"/") {
			out = append(out, f[4])
		}
	}
	return out
}
