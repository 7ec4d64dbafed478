package agent

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/utils/ptr"

	"nodeagent/agent/config"
	"nodeagent/agent/node"
	"nodeagent/cgroups"
	"nodeagent/cgroups/cgroupstest"
	"nodeagent/cri/critest"
)

// The whole agent, built from a config and injected dependencies, runs a
// static pod through the in-memory runtime and a fake cgroup hierarchy: the
// pod's cgroup holds its limits, its sandbox is placed in it, and a removed
// manifest leaves nothing behind. No host runtime or cgroup is touched.
func TestAgentRunsAStaticPodOnInjectedDependencies(t *testing.T) {
	dir := t.TempDir()
	cfg := config.Defaults()
	cfg.StaticPodPath = filepath.Join(dir, "manifests")
	cfg.PodLogsDir = filepath.Join(dir, "logs")
	cfg.ReadOnlyPort, cfg.HealthzPort = 0, ptr.To[int32](0)
	cfg.FileCheckFrequency.Duration = 50 * time.Millisecond
	cfg.EvictionHard = map[string]string{"memory.available": "1Mi"}
	cfg.ResolverConfig = ptr.To("")
	if err := os.MkdirAll(cfg.StaticPodPath, 0o755); err != nil {
		t.Fatal(err)
	}
	manifest := filepath.Join(cfg.StaticPodPath, "web.yaml")
	if err := os.WriteFile(manifest, []byte(`apiVersion: v1
kind: Pod
metadata: {name: web}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: registry.example/web:1
    resources: {limits: {cpu: 250m, memory: 64Mi}}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	rt, cg := critest.New(), cgroupstest.New(2)
	a, err := New(&cfg, Options{NodeName: "unit", RootDir: filepath.Join(dir, "root"), CNIConfDir: filepath.Join(dir, "cni"), CNIBinDirs: []string{dir},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Runtime: rt, Cgroups: cg,
		Machine: &node.Machine{CPUs: 4, MemoryBytes: 8 << 30, PIDMax: 1 << 22, EphemeralStorageBytes: 100 << 30}, ShareRootDir: keepPrivate, Sysctl: kernelAsWanted()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	eventually := func(what string, ok func() bool) {
		t.Helper()
		for end := time.Now().Add(20 * time.Second); !ok(); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(end) {
				t.Fatalf("timed out waiting for %s; runtime calls %v", what, rt.Ops())
			}
		}
	}
	eventually("the container started", func() bool { return len(rt.Calls("StartContainer")) == 1 })

	parent := rt.Calls("RunPodSandbox")[0].Sandbox.GetLinux().GetCgroupParent()
	rc, ok := cg.Values(cgroups.ParseCgroupfs(parent))
	if !ok || rc.Memory == nil || *rc.Memory != 64<<20 || rc.CPUQuota == nil || *rc.CPUQuota != 25000 {
		t.Fatalf("sandbox placed in %q holding %+v (exists %v); want the Guaranteed pod's cgroup with its limits", parent, rc, ok)
	}

	if err := os.Remove(manifest); err != nil {
		t.Fatal(err)
	}
	eventually("the sandbox removed", func() bool { return len(rt.Calls("RemovePodSandbox")) == 1 })
	eventually("the pod cgroup removed", func() bool { return !cg.Exists(cgroups.ParseCgroupfs(parent)) })
}

// On a cgroup v1 host the agent stops at start unless failCgroupV1 is
// false, as the kubelet since 1.35; with false it runs and warns the
// kubelet's way (a CgroupV1 event on the node).
func TestFailCgroupV1RefusesAV1Host(t *testing.T) {
	for _, fail := range []bool{true, false} {
		dir := t.TempDir()
		cfg := config.Defaults()
		cfg.FailCgroupV1 = ptr.To(fail)
		cfg.StaticPodPath = filepath.Join(dir, "manifests")
		cfg.PodLogsDir = filepath.Join(dir, "logs")
		cfg.ReadOnlyPort, cfg.HealthzPort = 0, ptr.To[int32](0)
		cfg.EvictionHard = map[string]string{"memory.available": "1Mi"}
		cfg.ResolverConfig = ptr.To("")
		if err := os.MkdirAll(cfg.StaticPodPath, 0o755); err != nil {
			t.Fatal(err)
		}
		var logs strings.Builder
		a, err := New(&cfg, Options{NodeName: "unit", RootDir: filepath.Join(dir, "root"), CNIConfDir: filepath.Join(dir, "cni"), CNIBinDirs: []string{dir},
			Logger: slog.New(slog.NewTextHandler(&syncWriter{w: &logs}, nil)), Runtime: critest.New(), Cgroups: cgroupstest.New(1),
			Machine: &node.Machine{CPUs: 4, MemoryBytes: 8 << 30, PIDMax: 1 << 22, EphemeralStorageBytes: 100 << 30}, ShareRootDir: keepPrivate, Sysctl: kernelAsWanted()})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err = a.Run(ctx)
		cancel()
		switch {
		case fail && (err == nil || !strings.Contains(err.Error(), "failCgroupV1")):
			t.Errorf("failCgroupV1 true on v1: Run %v, want a refusal naming failCgroupV1", err)
		case !fail && err != nil:
			t.Errorf("failCgroupV1 false on v1: Run %v, want it to run", err)
		case !fail && !strings.Contains(logs.String(), "cgroup v1 support is deprecated"):
			t.Errorf("failCgroupV1 false on v1: no deprecation warning in the log:\n%s", logs.String())
		}
	}
}

// syncWriter serializes writes from the agent's goroutines.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// keepPrivate stands in for making the root directory shared: these
// agents run on fakes, in a test's temporary directory.
func keepPrivate(string) error { return nil }
