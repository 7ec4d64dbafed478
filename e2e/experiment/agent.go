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
// to, the image the pods run (it needs memhog and busybox), and which
// agent acts on the pressure.
type Env struct {
	AgentBin        string
	RuntimeEndpoint string
	Image           string
	// Agent is nodeagent (the default), kubelet or earlyoom (Agents).
	Agent string
	// KubeletBin, RuntimeBin, Registry and PauseImage start the kubelet
	// on a containerd of its own (make kubelet; bin/runtime).
	KubeletBin, RuntimeBin, Registry, PauseImage string
	// ControlplaneBin runs the control plane the kubelet joins: a
	// standalone kubelet never evicts (static pods count as critical).
	ControlplaneBin string
	// EarlyoomBin is the userspace OOM daemon (Debian's earlyoom).
	EarlyoomBin string
}

// peer is what runs a scenario's pods and acts, or not, on the pressure:
// nodeagent, the kubelet, or earlyoom beside a nodeagent whose eviction is
// off.
type peer interface {
	node() string
	// podsCgroupRoot holds kubepods, for the sampler.
	podsCgroupRoot() string
	apply(*corev1.Pod) error
	pods() ([]corev1.Pod, error)
	// pid is the process whose scheduling delay the run reports.
	pid() int
	// collect adds what the peer itself recorded: traces, events, kills.
	collect(r *Run) error
	removePods(timeout time.Duration) error
	stop()
}

// agent is one nodeagent started for a run, with its own cgroup root, port
// and directories, so runs do not see each other.
type agent struct {
	*launch.Agent
	manifests, cgroupRoot, nodeName string
}

// startAgent starts nodeagent in dir; joined to cp when it is set.
func startAgent(ctx context.Context, env Env, dir, settings string, cp *launch.ControlPlane, args ...string) (*agent, error) {
	b := make([]byte, 4)
	rand.Read(b)
	suffix := hex.EncodeToString(b)
	if cp != nil {
		kubeconfig := dir + ".kubeconfig"
		if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
			return nil, err
		}
		if err := cp.NodeKubeconfig("experiment-"+suffix, kubeconfig); err != nil {
			return nil, err
		}
		args = append(args, "--kubeconfig", kubeconfig)
	}
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
	a := &agent{Agent: l, manifests: l.Manifests, cgroupRoot: l.CgroupRoot}
	var node corev1.Node
	if err := a.get("/node", &node); err != nil {
		a.stop()
		return nil, err
	}
	a.nodeName = node.Name
	return a, nil
}

func (a *agent) node() string           { return a.nodeName }
func (a *agent) podsCgroupRoot() string { return a.cgroupRoot }
func (a *agent) pid() int               { return a.Pid() }

func (a *agent) get(path string, into any) error {
	return a.Client.Get(context.Background(), path, into)
}

func (a *agent) pods() ([]corev1.Pod, error) { return a.Client.Pods(context.Background()) }

// apply writes a pod's manifest atomically.
func (a *agent) apply(pod *corev1.Pod) error { return writeManifest(a.manifests, pod) }

func writeManifest(dir string, pod *corev1.Pod) error {
	data, err := yaml.Marshal(pod)
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, "."+pod.Name+".tmp")
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, pod.Name+".yaml"))
}

// collect adds the agent's evictions, as /evictions traced them, and the
// kernel's kills, as its OOMKilling events name them.
func (a *agent) collect(r *Run) error {
	if err := a.get("/evictions", &r.Evictions); err != nil {
		return err
	}
	for _, t := range r.Evictions {
		for _, v := range t.Victims {
			r.Events = append(r.Events, Event{T: Elapsed(r.Start, t.KillSentAt), Kind: "eviction", By: "agent", Pod: podGroupName(v.Pod, a.nodeName),
				Note: fmt.Sprintf("%s %s (woken by %s)", t.Signal, t.Threshold, orPoll(t.TriggeredBy))})
		}
	}
	var events corev1.EventList
	a.get("/events", &events)
	for _, e := range events.Items {
		if e.Reason == "OOMKilling" {
			// The node's event names the pod in its message; the pod's own
			// is about the pod.
			pod := oomPod(e.Message, a.nodeName)
			if pod == "" && e.InvolvedObject.Kind == "Pod" {
				pod = podGroupName(e.InvolvedObject.Name, a.nodeName)
			}
			r.Events = append(r.Events, Event{T: Elapsed(r.Start, e.LastTimestamp.Time), Kind: "oom-kill", By: "kernel", Pod: pod, Note: e.Message})
		}
	}
	return nil
}

// removePods deletes every manifest and waits until the agent has let
// every pod go.
func (a *agent) removePods(timeout time.Duration) error {
	return removeManifests(a.manifests, timeout, a.pods)
}

// removeManifests deletes every manifest in dir and waits until list is
// empty for 2 s (a manifest written just before may not be listed yet).
func removeManifests(dir string, timeout time.Duration, list func() ([]corev1.Pod, error)) error {
	files, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
	for _, f := range files {
		os.Remove(f)
	}
	deadline := time.Now().Add(timeout)
	var emptySince time.Time
	for {
		pods, err := list()
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
