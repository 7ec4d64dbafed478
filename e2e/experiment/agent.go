package experiment

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"nodeagent/api"
)

// Env is where experiments run: the agent binary, the runtime it talks
// to, and the image the pods run (it needs memhog and busybox).
type Env struct {
	AgentBin        string
	RuntimeEndpoint string
	Image           string
}

// agent is one agent started for a run, with its own cgroup root, port
// and directories, so runs do not see each other.
type agent struct {
	dir, manifests, cgroupRoot, api string
	cmd                             *exec.Cmd
	exited                          chan error
	client                          *api.Client
}

func startAgent(ctx context.Context, env Env, dir, settings string, args ...string) (*agent, error) {
	b := make([]byte, 4)
	rand.Read(b)
	suffix := hex.EncodeToString(b)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	a := &agent{dir: dir, manifests: filepath.Join(dir, "manifests"), cgroupRoot: "/nodeagent-experiment-" + suffix,
		api: fmt.Sprintf("http://127.0.0.1:%d", port), exited: make(chan error, 1)}
	a.client = api.NewClient(a.api, "")
	for _, d := range []string{a.manifests, filepath.Join(dir, "logs"), filepath.Join(dir, "root")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	config := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
containerRuntimeEndpoint: %s
staticPodPath: %s
podLogsDir: %s
cgroupRoot: %s
readOnlyPort: %d
fileCheckFrequency: 2s
%s`, env.RuntimeEndpoint, a.manifests, filepath.Join(dir, "logs"), a.cgroupRoot, port, settings)
	configFile := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(configFile, []byte(config), 0o644); err != nil {
		return nil, err
	}
	log, err := os.Create(filepath.Join(dir, "agent.log"))
	if err != nil {
		return nil, err
	}
	a.cmd = exec.Command(env.AgentBin, "--config", configFile, "--hostname-override", "experiment-"+suffix,
		"--root-dir", filepath.Join(dir, "root"), "--control-socket", filepath.Join(dir, "control.sock"), "--log-level", "debug")
	a.cmd.Args = append(a.cmd.Args, args...)
	a.cmd.Stdout, a.cmd.Stderr = log, log
	if err := a.cmd.Start(); err != nil {
		log.Close()
		return nil, fmt.Errorf("start %s: %w", env.AgentBin, err)
	}
	go func() { a.exited <- a.cmd.Wait(); log.Close() }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case err := <-a.exited:
			a.exited <- err
			tail, _ := os.ReadFile(filepath.Join(dir, "agent.log"))
			return nil, fmt.Errorf("the agent exited (%v): %s", err, lastLines(string(tail), 5))
		case <-ctx.Done():
			a.stop()
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		if a.client.Healthz(ctx) == nil {
			return a, nil
		}
		if time.Now().After(deadline) {
			a.stop()
			return nil, fmt.Errorf("the agent did not become healthy within 30 s (log %s)", filepath.Join(dir, "agent.log"))
		}
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

func (a *agent) get(path string, into any) error {
	return a.client.Get(context.Background(), path, into)
}

func (a *agent) pods() ([]corev1.Pod, error) { return a.client.Pods(context.Background()) }

// apply writes a pod's manifest atomically.
func (a *agent) apply(pod *corev1.Pod) error {
	data, err := yaml.Marshal(pod)
	if err != nil {
		return err
	}
	tmp := filepath.Join(a.manifests, "."+pod.Name+".tmp")
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(a.manifests, pod.Name+".yaml"))
}

// removePods deletes every manifest and waits until the agent has let
// every pod go.
func (a *agent) removePods(timeout time.Duration) error {
	files, _ := filepath.Glob(filepath.Join(a.manifests, "*.yaml"))
	for _, f := range files {
		os.Remove(f)
	}
	// Empty for 2 s: a manifest written just before may not be listed yet.
	deadline := time.Now().Add(timeout)
	var emptySince time.Time
	for {
		pods, err := a.pods()
		switch {
		case err != nil || len(pods) > 0:
			emptySince = time.Time{}
		case emptySince.IsZero():
			emptySince = time.Now()
		case time.Since(emptySince) >= 2*time.Second:
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d pods still listed %s after their manifests were removed (%v)", len(pods), timeout, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// stop ends the agent (pods were removed first) and removes its cgroups.
func (a *agent) stop() {
	if a.cmd.Process != nil {
		a.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-a.exited:
		case <-time.After(15 * time.Second):
			a.cmd.Process.Kill()
			<-a.exited
		}
	}
	dirs, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", "*", a.cgroupRoot))
	if d := filepath.Join("/sys/fs/cgroup", a.cgroupRoot); exists(d) {
		dirs = append(dirs, d)
	}
	for _, d := range dirs {
		removeCgroupDir(d)
	}
}

func exists(path string) bool { _, err := os.Stat(path); return err == nil }

// removeCgroupDir removes an empty cgroup tree, deepest first.
func removeCgroupDir(dir string) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.IsDir() {
			removeCgroupDir(filepath.Join(dir, e.Name()))
		}
	}
	os.Remove(dir)
}
