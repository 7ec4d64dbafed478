package experiment

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"nodeagent/e2e/launch"
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
	*launch.Agent
	manifests, cgroupRoot string
}

func startAgent(ctx context.Context, env Env, dir, settings string, args ...string) (*agent, error) {
	b := make([]byte, 4)
	rand.Read(b)
	suffix := hex.EncodeToString(b)
	l, err := launch.New(launch.Options{Bin: env.AgentBin, RuntimeEndpoint: env.RuntimeEndpoint, Dir: dir,
		NodeName: "experiment-" + suffix, CgroupRoot: "/nodeagent-experiment-" + suffix, Config: settings, Args: args})
	if err != nil {
		return nil, err
	}
	if err := l.Start(ctx, 30*time.Second); err != nil {
		l.RemoveMounts()
		l.RemoveCgroups()
		return nil, err
	}
	return &agent{Agent: l, manifests: l.Manifests, cgroupRoot: l.CgroupRoot}, nil
}

func (a *agent) get(path string, into any) error {
	return a.Client.Get(context.Background(), path, into)
}

func (a *agent) pods() ([]corev1.Pod, error) { return a.Client.Pods(context.Background()) }

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

// stop ends the agent (pods were removed first) and removes its mounts
// and cgroups.
func (a *agent) stop() {
	a.Stop(15 * time.Second)
	a.RemoveMounts()
	a.RemoveCgroups()
}
