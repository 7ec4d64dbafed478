//go:build integration

// Package integration drives bin/nodeagent against the real containerd,
// runc, CNI plugins and cgroups started by `make runtime-up`. Every test
// runs its own agent with its own node name, cgroup root, manifest
// directory and API port, so it never touches another agent's pods.
package integration

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"nodeagent/api"
	"nodeagent/cri"
)

var (
	criEndpoint = os.Getenv("CRI_ENDPOINT")
	agentBin    = os.Getenv("NODEAGENT_BIN")
	nodectlBin  = os.Getenv("NODECTL_BIN")
	testImage   = envOr("TEST_IMAGE", "127.0.0.1:5000/nodeagent/test:latest")
)

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func TestMain(m *testing.M) {
	if criEndpoint == "" || agentBin == "" {
		fmt.Fprintln(os.Stderr, "integration tests need CRI_ENDPOINT and NODEAGENT_BIN: run them with `make integration`")
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// node is one agent under test with everything it owns.
type node struct {
	t          *testing.T
	name       string
	dir        string // temp dir: manifests, logs, state
	manifests  string
	cgroupRoot string
	port       int
	configFile string
	args       []string // extra agent flags
	env        []string // extra environment
	cri        *cri.Client

	mu   sync.Mutex
	cmd  *exec.Cmd
	log  *bytes.Buffer
	done chan error
}

// newNode prepares (but does not start) an agent. extraConfig is appended
// to its KubeletConfiguration.
func newNode(t *testing.T, extraConfig string) *node {
	t.Helper()
	suffix := randomHex(4)
	n := &node{
		t:          t,
		name:       "itest-" + suffix,
		dir:        t.TempDir(),
		cgroupRoot: "/nodeagent-itest-" + suffix,
		port:       freePort(t),
	}
	n.manifests = filepath.Join(n.dir, "manifests")
	client, err := cri.New(criEndpoint, cri.Options{Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	n.cri = client
	cfg := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
containerRuntimeEndpoint: %s
staticPodPath: %s
cgroupRoot: %s
readOnlyPort: %d
podLogsDir: %s
fileCheckFrequency: 2s
%s`, criEndpoint, n.manifests, n.cgroupRoot, n.port, filepath.Join(n.dir, "logs"), extraConfig)
	n.configFile = filepath.Join(n.dir, "config.yaml")
	if err := os.WriteFile(n.configFile, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.cleanup)
	return n
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// start runs the agent and waits for its API.
func (n *node) start() {
	n.t.Helper()
	n.mu.Lock()
	n.log = &bytes.Buffer{}
	n.cmd = exec.Command(agentBin, "--config", n.configFile, "--hostname-override", n.name,
		"--root-dir", filepath.Join(n.dir, "root"), "--control-socket", filepath.Join(n.dir, "control.sock"), "--log-level", "debug")
	n.cmd.Args = append(n.cmd.Args, n.args...)
	n.cmd.Env = append(os.Environ(), n.env...)
	n.cmd.Stdout, n.cmd.Stderr = n.log, n.log
	if err := n.cmd.Start(); err != nil {
		n.mu.Unlock()
		n.t.Fatal(err)
	}
	n.done = make(chan error, 1)
	go func(cmd *exec.Cmd, done chan error) { done <- cmd.Wait() }(n.cmd, n.done)
	n.mu.Unlock()
	n.eventually("agent API up", 30*time.Second, func() error {
		select {
		case err := <-n.done:
			n.done <- err
			return fmt.Errorf("agent exited: %v", err)
		default:
		}
		return n.client().Healthz(context.Background())
	})
}

// stop sends SIGTERM and returns the agent's exit error.
func (n *node) stop() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return nil
	}
	n.cmd.Process.Signal(syscall.SIGTERM)
	var err error
	select {
	case err = <-n.done:
	case <-time.After(30 * time.Second):
		n.cmd.Process.Kill()
		err = fmt.Errorf("agent did not stop within 30s of SIGTERM")
	}
	n.cmd = nil
	return err
}

// signal sends the running agent a signal.
func (n *node) signal(sig os.Signal) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		n.t.Fatal("agent not running")
	}
	n.cmd.Process.Signal(sig)
}

func (n *node) logText() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.log == nil {
		return ""
	}
	return n.log.String()
}

// controlSocket is where the agent under test listens for nodectl's changes.
func (n *node) controlSocket() string { return filepath.Join(n.dir, "control.sock") }

// client is the local-API client of the agent, acting through its
// control socket.
func (n *node) client() *api.Client { return api.NewClient(n.url(""), n.controlSocket()) }

func (n *node) url(path string) string { return fmt.Sprintf("http://127.0.0.1:%d%s", n.port, path) }

// cleanup stops the agent, then removes whatever it left in the runtime
// and in the cgroup tree, so a failing test does not leak pods.
func (n *node) cleanup() {
	if n.t.Failed() {
		n.t.Logf("agent log:\n%s", n.logText())
	}
	n.stop()
	ctx := context.Background()
	sel := map[string]string{cri.LabelManagedBy: n.name}
	if sbs, err := n.cri.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: sel}); err == nil {
		for _, sb := range sbs {
			n.cri.StopPodSandbox(ctx, sb.Id)
			n.cri.RemovePodSandbox(ctx, sb.Id)
		}
	}
	removeCgroupTree(n.cgroupRoot)
	n.cri.Close()
}

// removeCgroupTree removes a cgroup directory bottom-up in every hierarchy.
func removeCgroupTree(root string) {
	dirs, _ := filepath.Glob("/sys/fs/cgroup/*" + root)
	for _, d := range dirs {
		var all []string
		filepath.Walk(d, func(p string, info os.FileInfo, err error) error {
			if err == nil && info.IsDir() {
				all = append(all, p)
			}
			return nil
		})
		for i := len(all) - 1; i >= 0; i-- {
			syscall.Rmdir(all[i])
		}
	}
}

func (n *node) writeManifest(file, body string) {
	n.t.Helper()
	if err := os.MkdirAll(n.manifests, 0o755); err != nil {
		n.t.Fatal(err)
	}
	tmp := filepath.Join(n.manifests, "."+file+".tmp")
	if err := os.WriteFile(tmp, []byte(body), 0o644); err != nil {
		n.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(n.manifests, file)); err != nil {
		n.t.Fatal(err)
	}
}

func (n *node) removeManifest(file string) {
	n.t.Helper()
	if err := os.Remove(filepath.Join(n.manifests, file)); err != nil {
		n.t.Fatal(err)
	}
}

func (n *node) pods() ([]corev1.Pod, error) { return n.client().Pods(context.Background()) }

// pod returns the pod named <name>-<node>, or nil.
func (n *node) pod(name string) (*corev1.Pod, error) {
	pods, err := n.pods()
	if err != nil {
		return nil, err
	}
	for i := range pods {
		if pods[i].Name == name+"-"+n.name {
			return &pods[i], nil
		}
	}
	return nil, nil
}

// waitPod polls until check accepts the pod (nil when absent).
func (n *node) waitPod(name string, timeout time.Duration, what string, check func(*corev1.Pod) error) *corev1.Pod {
	n.t.Helper()
	var got *corev1.Pod
	n.eventually(fmt.Sprintf("pod %s %s", name, what), timeout, func() error {
		p, err := n.pod(name)
		if err != nil {
			return err
		}
		got = p
		return check(p)
	})
	return got
}

func (n *node) waitRunning(name string) *corev1.Pod {
	n.t.Helper()
	return n.waitPod(name, 60*time.Second, "running", func(p *corev1.Pod) error {
		if p == nil {
			return fmt.Errorf("not listed")
		}
		if p.Status.Phase != corev1.PodRunning || p.Status.PodIP == "" {
			return fmt.Errorf("phase %s ip %q containers %+v", p.Status.Phase, p.Status.PodIP, p.Status.ContainerStatuses)
		}
		for _, cs := range p.Status.ContainerStatuses {
			if cs.State.Running == nil {
				return fmt.Errorf("container %s not running: %+v", cs.Name, cs.State)
			}
		}
		return nil
	})
}

// waitRejected waits for a pod that admission turned away (phase Failed).
func (n *node) waitRejected(name string) *corev1.Pod {
	n.t.Helper()
	return n.waitPod(name, 30*time.Second, "rejected", func(p *corev1.Pod) error {
		if p == nil || p.Status.Phase != corev1.PodFailed {
			return fmt.Errorf("not failed: %+v", p)
		}
		return nil
	})
}

func (n *node) waitGone(name string) {
	n.t.Helper()
	n.waitPod(name, 90*time.Second, "gone", func(p *corev1.Pod) error {
		if p != nil {
			return fmt.Errorf("still listed, phase %s", p.Status.Phase)
		}
		return nil
	})
}

// eventually polls f until it returns nil or the timeout passes.
func (n *node) eventually(what string, timeout time.Duration, f func() error) {
	n.t.Helper()
	deadline := time.Now().Add(timeout)
	var err error
	for time.Now().Before(deadline) {
		if err = f(); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	n.t.Fatalf("timed out after %s waiting for %s: %v", timeout, what, err)
}

// runtimeObjects lists the sandboxes and containers the runtime holds for a pod UID.
func (n *node) runtimeObjects(uid string) (sandboxes []*runtimeapi.PodSandbox, containers []*runtimeapi.Container) {
	n.t.Helper()
	ctx := context.Background()
	sel := map[string]string{cri.LabelPodUID: uid}
	sbs, err := n.cri.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: sel})
	if err != nil {
		n.t.Fatal(err)
	}
	cs, err := n.cri.ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: sel})
	if err != nil {
		n.t.Fatal(err)
	}
	return sbs, cs
}

// cgroupFile reads a cgroup v1 file: controller, cgroupfs path, file.
func cgroupFile(t *testing.T, controller, path, file string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/sys/fs/cgroup", controller, path, file))
	if err != nil {
		t.Fatalf("read cgroup file: %v", err)
	}
	return strings.TrimSpace(string(b))
}

// cgroupDirs lists the hierarchies in which path exists.
func cgroupDirs(path string) []string {
	dirs, _ := filepath.Glob("/sys/fs/cgroup/*" + path)
	return dirs
}

// podManifest is a minimal pod running sleep, with optional resources.
func podManifest(name, resources string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: main
    image: %s
    command: ["sleep", "3600"]
%s`, name, testImage, resources)
}

// nodectl runs bin/nodectl against this node's API.
func (n *node) nodectl(args ...string) (string, error) {
	n.t.Helper()
	if nodectlBin == "" {
		n.t.Fatal("NODECTL_BIN is not set (run `make integration`)")
	}
	out, err := exec.Command(nodectlBin, append([]string{"--server", n.url(""), "--control-socket", n.controlSocket()}, args...)...).CombinedOutput()
	return string(out), err
}

// runOnce runs the agent in the foreground for a start-up that must fail,
// and returns its output; an agent still running after 20 s is stopped and
// reported as an error-free start.
func (n *node) runOnce() (string, error) {
	n.t.Helper()
	cmd := exec.Command(agentBin, "--config", n.configFile, "--hostname-override", n.name,
		"--root-dir", filepath.Join(n.dir, "root"), "--control-socket", filepath.Join(n.dir, "control.sock"))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		n.t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return out.String(), err
	case <-time.After(20 * time.Second):
		cmd.Process.Signal(syscall.SIGTERM)
		<-done
		return out.String(), nil
	}
}

// getJSON decodes an answer of the agent's API, failing the test on error.
func (n *node) getJSON(path string, into any) {
	n.t.Helper()
	if err := n.client().Get(context.Background(), path, into); err != nil {
		n.t.Fatal(err)
	}
}

// nodeObject is the agent's /node.
func (n *node) nodeObject() corev1.Node {
	n.t.Helper()
	var node corev1.Node
	n.getJSON("/node", &node)
	return node
}
