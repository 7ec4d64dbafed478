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
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"nodeagent/api"
	"nodeagent/cri"
	"nodeagent/e2e/experiment"
	"nodeagent/e2e/launch"
)

var (
	criEndpoint = os.Getenv("CRI_ENDPOINT")
	agentBin    = os.Getenv("NODEAGENT_BIN")
	nodectlBin  = os.Getenv("NODECTL_BIN")
	// controlplaneBin runs the API-mode tests' control plane.
	controlplaneBin = os.Getenv("CONTROLPLANE_BIN")
	// mixinSeriesBin lists the series the kubernetes-mixin's kubelet
	// rules read (test/mixin).
	mixinSeriesBin = os.Getenv("MIXIN_SERIES_BIN")
	testImage      = envOr("TEST_IMAGE", "127.0.0.1:5050/nodeagent/test:latest")
	// nodeAddress is the address cluster nodes listen and are reached on
	// (hack/runtime.sh puts it on a local link): the API server does not
	// proxy to loopback.
	nodeAddress = envOr("NODE_ADDRESS", "198.18.0.1")
)

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func TestMain(m *testing.M) {
	if criEndpoint == "" || agentBin == "" || controlplaneBin == "" || mixinSeriesBin == "" {
		fmt.Fprintln(os.Stderr, "integration tests need CRI_ENDPOINT, NODEAGENT_BIN, CONTROLPLANE_BIN and MIXIN_SERIES_BIN: run them with `make integration`")
		os.Exit(1)
	}
	stopLoad, err := startBusyNode()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	if err := stopLoad(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping the CPU load:", err)
		code = 1
	}
	if sharedCP != nil {
		sharedCP.Stop()
		if code == 0 {
			os.RemoveAll(sharedCP.Dir)
		} else {
			fmt.Fprintf(os.Stderr, "control plane state and log kept in %s\n", sharedCP.Dir)
		}
	}
	os.Exit(code)
}

// node is one agent under test with everything it owns.
type node struct {
	t          *testing.T
	agent      *launch.Agent
	name       string
	dir        string // temp dir: manifests, logs, state
	manifests  string
	cgroupRoot string
	port       int
	configFile string
	args       []string // extra agent flags
	env        []string // extra environment
	cri        *cri.Client

	mu  sync.Mutex
	log *logBuffer
}

// newNode prepares (but does not start) an agent. extraConfig is appended
// to its KubeletConfiguration.
func newNode(t *testing.T, extraConfig string) *node {
	t.Helper()
	return newNodeAt(t, "127.0.0.1", extraConfig)
}

// newNodeAt is newNode listening on address.
func newNodeAt(t *testing.T, address, extraConfig string) *node {
	t.Helper()
	suffix := randomHex(4)
	a, err := launch.New(launch.Options{Bin: agentBin, RuntimeEndpoint: criEndpoint, Dir: t.TempDir(), Address: address,
		NodeName: "itest-" + suffix, CgroupRoot: "/nodeagent-itest-" + suffix, Config: extraConfig})
	if err != nil {
		t.Fatal(err)
	}
	n := &node{t: t, agent: a, name: a.NodeName, dir: a.Dir, manifests: a.Manifests, cgroupRoot: a.CgroupRoot, port: a.Port, configFile: a.ConfigFile}
	client, err := cri.New(criEndpoint, cri.Options{Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	n.cri = client
	t.Cleanup(n.cleanup)
	return n
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func freePort(t *testing.T) int {
	port, err := launch.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// start runs the agent and waits for its API.
func (n *node) start() {
	n.t.Helper()
	n.mu.Lock()
	n.log = &logBuffer{}
	n.agent.Output, n.agent.Args, n.agent.Env = n.log, n.args, n.env
	n.mu.Unlock()
	if err := n.agent.Start(context.Background(), 30*time.Second); err != nil {
		n.t.Fatalf("%v\nagent log:\n%s", err, n.logText())
	}
}

// stop sends SIGTERM and returns the agent's exit error.
func (n *node) stop() error { return n.agent.Stop(30 * time.Second) }

// kill ends the agent with SIGKILL, as a crash would.
func (n *node) kill() {
	n.agent.Signal(syscall.SIGKILL)
	<-n.agent.Exited()
	n.agent.Stop(time.Second)
}

// signal sends the running agent a signal.
func (n *node) signal(sig os.Signal) {
	if err := n.agent.Signal(sig); err != nil {
		n.t.Fatal(err)
	}
}

// logBuffer is the agent's output: the process writes it while a test
// reads it.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
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
func (n *node) controlSocket() string { return n.agent.ControlSocket }

// client is the local-API client of the agent, acting through its
// control socket.
func (n *node) client() *api.Client { return n.agent.Client }

func (n *node) url(path string) string { return n.agent.URL(path) }

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
	// Pods the test left running (API pods outlive a stopped agent) keep
	// their tmpfs volumes mounted under the root, itself a shared bind.
	if err := n.agent.RemoveMounts(); err != nil {
		n.t.Logf("unmount what the agent and its pods left in %s: %v", n.agent.RootDir, err)
	}
	n.agent.RemoveCgroups()
	n.cri.Close()
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
	n.agent.Args, n.agent.Env = n.args, n.env
	cmd := n.agent.Command()
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

// startBusyNode saturates the CPUs for the whole run when
// NODEAGENT_TEST_CPU_LOAD=N (N busy loops per core, on the host outside
// kubepods; `make integration-loaded`): eviction and probe timing must
// hold on a busy node, not only on a quiet one.
func startBusyNode() (stop func() error, err error) {
	v := os.Getenv("NODEAGENT_TEST_CPU_LOAD")
	if v == "" {
		return func() error { return nil }, nil
	}
	perCore, err := strconv.Atoi(v)
	if err != nil || perCore < 1 || perCore > 64 {
		return nil, fmt.Errorf("NODEAGENT_TEST_CPU_LOAD=%q: want busy loops per core, 1..64", v)
	}
	dir, err := os.MkdirTemp("", "nodeagent-test-load-")
	if err != nil {
		return nil, err
	}
	load, err := experiment.StartHostLoad(&experiment.Background{CPUWorkers: perCore * runtime.NumCPU()}, dir)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(os.Stderr, "busy node: %d busy loops on %d cores for the whole run\n", perCore*runtime.NumCPU(), runtime.NumCPU())
	return load.Stop, nil
}
