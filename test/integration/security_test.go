//go:build integration

package integration

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
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

// vmHWM is a process's peak resident memory, in bytes.
func vmHWM(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			var kb int64
			fmt.Sscan(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), &kb)
			return kb << 10
		}
	}
	t.Fatal("no VmHWM")
	return 0
}

// bytesRead is what a process has read through read(2) and its kin
// (rchar in /proc/<pid>/io): files, pipes and sockets.
func bytesRead(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "rchar: "); ok {
			var n int64
			fmt.Sscan(v, &n)
			return n
		}
	}
	t.Fatal("no rchar")
	return 0
}

func (n *node) pid() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.agent.Pid()
}

// TestHugeManifestLeavesTheAgentFlat: the audit dropped a 200 MiB file in
// the manifest directory and the agent went from 32 MiB to 235 MiB RSS. It
// is refused by its size, never read, and named in the log.
func TestHugeManifestLeavesTheAgentFlat(t *testing.T) {
	n := newNode(t, "")
	n.start()
	n.writeManifest("ok.yaml", podManifest("ok", ""))
	n.waitRunning("ok")
	before, readBefore := vmHWM(t, n.pid()), bytesRead(t, n.pid())
	big, err := os.Create(filepath.Join(n.manifests, "big.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// Real bytes (a sparse file reads as zeros just the same, but a YAML
	// document of spaces is what a careless copy would leave).
	chunk := []byte(strings.Repeat(" ", 1<<20))
	for i := 0; i < 200; i++ {
		big.Write(chunk)
	}
	big.Close()
	want := "manifest is 209715200 bytes, more than the 10485760 allowed"
	n.eventually("the big manifest refused in the log", 30*time.Second, func() error {
		if !strings.Contains(n.logText(), want) {
			return fmt.Errorf("not logged yet")
		}
		return nil
	})
	// A rescan or two more (fileCheckFrequency 2s) must not read it either.
	time.Sleep(5 * time.Second)
	// What it read says it directly: reading the file once is 200 MiB. The
	// peak RSS, whose noise grows on a busy node, must stay well below it.
	if read := bytesRead(t, n.pid()) - readBefore; read > 20<<20 {
		t.Errorf("the agent read %d MiB with a 200 MiB manifest in its directory", read>>20)
	}
	if grown := vmHWM(t, n.pid()) - before; grown > 100<<20 {
		t.Errorf("the agent's peak RSS grew %d MiB with a 200 MiB manifest in its directory", grown>>20)
	}
	if p, _ := n.pod("ok"); p == nil || p.Status.Phase != corev1.PodRunning {
		t.Errorf("the good pod must keep running: %+v", p)
	}
}

// TestHugeUnterminatedLogLeavesAgentAndNodectlFlat: a container writes
// 256 MiB without a newline and fails, with FallbackToLogsOnError. The
// agent's termination message and nodectl logs read it with bounded
// memory; the message is the head of the last 80 lines, 2048 bytes.
func TestHugeUnterminatedLogLeavesAgentAndNodectlFlat(t *testing.T) {
	n := newNode(t, "containerLogMaxSize: 1Gi\n")
	n.start()
	n.writeManifest("flood.yaml", fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: flood}
spec:
  restartPolicy: Never
  containers:
  - name: main
    image: %s
    terminationMessagePolicy: FallbackToLogsOnError
    command: ["sh", "-c", "sleep 2; head -c 268435456 /dev/zero | tr '\\0' x; exit 1"]
`, testImage))
	n.waitRunning("flood")
	before := vmHWM(t, n.pid())
	p := n.waitPod("flood", 3*time.Minute, "failed", func(p *corev1.Pod) error {
		if p != nil && p.Status.Phase == corev1.PodFailed {
			return nil
		}
		return fmt.Errorf("phase %v", p.Status.Phase)
	})
	term := p.Status.ContainerStatuses[0].State.Terminated
	if term == nil || term.ExitCode != 1 || len(term.Message) != 2048 || strings.Trim(term.Message, "x") != "" {
		t.Errorf("termination: %+v (message of %d bytes); want exit 1 and 2048 bytes of x", term, len(term.Message))
	}
	if grown := vmHWM(t, n.pid()) - before; grown > 40<<20 {
		t.Errorf("the agent's peak RSS grew %d MiB while a container logged 256 MiB without a newline", grown>>20)
	}

	cmd := exec.Command(nodectlBin, "--server", n.url(""), "logs", "flood", "--control-socket", n.controlSocket())
	var out countingWriter
	cmd.Stdout = &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// nodectl's own peak, read from its /proc while it runs: the rusage
	// of a child started with vfork also counts this test process's peak.
	var peak atomic.Int64
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", cmd.Process.Pid))
			if err != nil {
				return
			}
			for _, line := range strings.Split(string(b), "\n") {
				if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
					var kb int64
					fmt.Sscan(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), &kb)
					peak.Store(max(peak.Load(), kb<<10))
				}
				if strings.HasPrefix(line, "State:") && strings.Contains(line, "zombie") {
					return
				}
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	<-sampled // the process has exited (a zombie) or is gone
	if err := cmd.Wait(); err != nil {
		t.Fatalf("nodectl logs: %v", err)
	}
	// The line as the container wrote it, without a newline it never
	// wrote: the kubelet's reader prints what the log holds.
	if out.n != 256<<20 {
		t.Errorf("nodectl logs printed %d bytes, want %d", out.n, 256<<20)
	}
	t.Logf("nodectl logs printed 256 MiB at a peak RSS of %d MiB", peak.Load()>>20)
	if rss := peak.Load(); rss == 0 || rss > 64<<20 {
		t.Errorf("nodectl logs peaked at %d MiB RSS printing one 256 MiB line", rss>>20)
	}
}

type countingWriter struct{ n int }

func (w *countingWriter) Write(p []byte) (int, error) { w.n += len(p); return len(p), nil }

// TestNodectlTakesNoOrdersFromTheReadOnlyPort: any local user can answer on
// the read-only port when the agent is down. The audit's malicious API
// made root nodectl delete the file named in a pod's annotation and write
// through the staticPodPath it reported. Now nodectl derives nothing it
// acts on from that port, and a control socket served by anyone but root
// is refused before a byte is sent.
func TestNodectlTakesNoOrdersFromTheReadOnlyPort(t *testing.T) {
	private := t.TempDir() // root's: the files the attacker wants gone or written
	victim := filepath.Join(private, "victim")
	os.WriteFile(victim, []byte("keep me"), 0o600)
	// The attacker's directory: nobody must reach it (t.TempDir's parent
	// is root's alone).
	attacker, err := os.MkdirTemp("/tmp", "nodeagent-attacker-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(attacker)
	os.Chmod(attacker, 0o777)
	os.Symlink(private, filepath.Join(attacker, "manifests")) // a "staticPodPath" leading into root's files

	evilPod := corev1.Pod{}
	evilPod.Name, evilPod.Namespace, evilPod.UID = "evil-n", "default", "u1"
	evilPod.Spec.NodeName = "n"
	evilPod.Annotations = map[string]string{"nodeagent.io/manifest": victim}
	evilPod.Spec.Containers = []corev1.Container{{Name: "c"}}
	evilPod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", ContainerID: "containerd://x", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/pods":
			json.NewEncoder(w).Encode(corev1.PodList{Items: []corev1.Pod{evilPod}})
		case "/configz":
			fmt.Fprintf(w, `{"kubeletconfig": {"staticPodPath": %q, "podLogsDir": %q}, "nodeagent": {"controlSocket": %q}}`,
				filepath.Join(attacker, "manifests"), private, filepath.Join(attacker, "sock"))
		default:
			http.NotFound(w, r)
		}
	}))
	defer fake.Close()

	// The attacker's own control socket, served by nobody.
	helper := filepath.Join(attacker, "untrusted")
	if out, err := exec.Command("go", "build", "-o", helper, "./testdata/untrusted").CombinedOutput(); err != nil {
		t.Fatalf("build the untrusted server: %v\n%s", err, out)
	}
	sock, requests := filepath.Join(attacker, "sock"), filepath.Join(attacker, "requests")
	srv := exec.Command(helper, sock, requests, filepath.Join(attacker, "manifests"))
	srv.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { srv.Process.Kill(); srv.Wait() }()
	waitFor(t, "the untrusted socket", func() bool { _, err := os.Stat(sock); return err == nil })

	manifest := filepath.Join(t.TempDir(), "good.yaml")
	os.WriteFile(manifest, []byte(podManifest("good", "")), 0o644)
	for _, socket := range []string{sock, filepath.Join(attacker, "missing.sock")} {
		for _, args := range [][]string{
			{"delete", "pod", "evil"},
			{"delete", "pod", "evil", "--grace-period", "0"},
			{"apply", "-f", manifest},
			{"logs", "evil"},
			{"exec", "evil", "--", "true"},
		} {
			cmd := exec.Command(nodectlBin, append([]string{"--server", fake.URL, "--control-socket", socket}, args...)...)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Errorf("nodectl %v against the fake API and %s succeeded:\n%s", args, socket, out)
			}
			if socket == sock && !strings.Contains(string(out), "not root") {
				t.Errorf("nodectl %v: %s; want it to refuse a control socket not served by root", args, out)
			}
		}
	}
	if b, err := os.ReadFile(victim); err != nil || string(b) != "keep me" {
		t.Errorf("the file named by the fake API's annotation: %q %v", b, err)
	}
	if entries, _ := os.ReadDir(private); len(entries) != 1 {
		t.Errorf("nodectl wrote into the directory the fake API pointed at: %v", entries)
	}
	if b, _ := os.ReadFile(requests); len(b) != 0 {
		t.Errorf("nodectl sent requests to a control socket served by nobody:\n%s", b)
	}
}

// A local user who answers on the read-only port while the agent's is
// elsewhere lists pod web with another pod's container ID and path
// names into /etc. nodectl exec and logs, with the real control socket,
// still act on the real web: the pod and container come from the control
// socket, never from that port.
func TestNodectlExecAndLogsResolveThroughTheControlSocket(t *testing.T) {
	n := newNode(t, "")
	n.writeManifest("web.yaml", podManifest("web", ""))
	n.writeManifest("other.yaml", podManifest("other", ""))
	n.start()
	web, other := n.waitRunning("web"), n.waitRunning("other")
	liar := *web.DeepCopy()
	liar.Namespace, liar.UID = "..", "../../../../etc"
	liar.Status.ContainerStatuses[0].ContainerID = other.Status.ContainerStatuses[0].ContainerID
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(corev1.PodList{Items: []corev1.Pod{liar}})
	}))
	defer fake.Close()
	out, err := exec.Command(nodectlBin, "--server", fake.URL, "--control-socket", n.controlSocket(), "exec", "web", "--", "hostname").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != web.Name {
		t.Errorf("nodectl exec web -- hostname through the lying port: %v %q, want %q", err, out, web.Name)
	}
	if _, err := exec.Command(nodectlBin, "--server", fake.URL, "--control-socket", n.controlSocket(), "logs", "web").CombinedOutput(); err != nil {
		t.Errorf("nodectl logs web through the lying port: %v", err)
	}
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if ok() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}
