package benchkit

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"nodeagent/cri"
	"nodeagent/e2e/launch"
)

// Kubelet is the real kubelet under measurement, the peer beside
// nodeagent, on a containerd of its own with the same binaries and
// configuration as nodeagent's.
type Kubelet struct {
	*launch.Kubelet
	RT      *cri.Client // its own containerd's
	Node    string
	written []string
}

// PeerFlags registers -kubelet and -runtime-bin (KUBELET_BIN,
// RUNTIME_BIN); call before flag.Parse.
func PeerFlags() (kubeletBin, runtimeBin *string) {
	return flag.String("kubelet", os.Getenv("KUBELET_BIN"), "the kubelet (make kubelet); empty: no kubelet side"),
		flag.String("runtime-bin", os.Getenv("RUNTIME_BIN"), "containerd, runc and the CNI plugins for the kubelet's own runtime (bin/runtime)")
}

// StartKubelet runs the kubelet with a fresh directory and its own
// containerd, pulls image into that runtime and warms it up (the first
// sandbox after a start is slow), as the bench does for nodeagent's. With
// a kubeconfig it joins that API server as node; empty: standalone. A
// kubelet that cannot start is one line of output and a nil peer: the
// run goes on without that side.
func StartKubelet(bin, runtimeBin, image, node, extraConfig, kubeconfig string) *Kubelet {
	if bin == "" || runtimeBin == "" {
		fmt.Println("bench: no kubelet side: KUBELET_BIN and RUNTIME_BIN unset (make bench sets them; make kubelet builds it)")
		return nil
	}
	dir, err := os.MkdirTemp("", "nodeagent-bench-kubelet-")
	Check(err)
	l, err := launch.NewKubelet(launch.KubeletOptions{Bin: bin, RuntimeBin: runtimeBin, Dir: dir, NodeName: node,
		Registry: envOr("REGISTRY", "127.0.0.1:5050"), PauseImage: envOr("PAUSE_IMAGE", "127.0.0.1:5050/nodeagent/pause:1.0"),
		Kubeconfig: kubeconfig, Config: "maxPods: 250\n" + extraConfig})
	if err != nil {
		fmt.Println("bench: no kubelet side:", err)
		os.RemoveAll(dir)
		return nil
	}
	// Undone on failure and on Ctrl-C, after the agents.
	AtFail(func() { l.Stop() })
	if err := l.Start(context.Background(), time.Minute); err != nil {
		fmt.Printf("bench: no kubelet side: %v (log %s)\n", err, l.LogPath())
		return nil
	}
	rt, err := cri.New(l.Runtime.Endpoint(), cri.Options{Timeout: time.Minute})
	Check(err)
	k := &Kubelet{Kubelet: l, RT: rt, Node: node}
	_, err = rt.PullImage(context.Background(), image, nil, nil)
	Check(err)
	return k
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// Write puts a static pod manifest into the kubelet's directory,
// atomically.
func (k *Kubelet) Write(name, body string) {
	tmp := filepath.Join(k.Manifests, "."+name)
	Check(os.WriteFile(tmp, []byte(body), 0o644))
	Check(os.Rename(tmp, filepath.Join(k.Manifests, name+".yaml")))
	k.written = append(k.written, name)
}

// WaitStarted returns, per pod, its container's start time (as the
// runtime records it) minus t0, and the containers.
func (k *Kubelet) WaitStarted(ctx context.Context, names []string, t0 time.Time) ([]time.Duration, []*runtimeapi.Container) {
	return WaitStarted(ctx, k.RT, nil, k.Node, names, t0, k.Exited(), "the kubelet", k.LogPath())
}

// WaitStarted waits for the static pods names of node to run, among the
// containers of rt with labels, and returns per pod its container's start
// time (as the runtime records it) minus t0, and the containers. It fails
// the run after 5 minutes or when who exits (its log at logPath).
func WaitStarted(ctx context.Context, rt *cri.Client, labels map[string]string, node string, names []string, t0 time.Time,
	exited <-chan struct{}, who, logPath string) ([]time.Duration, []*runtimeapi.Container) {
	want := map[string]bool{}
	for _, n := range names {
		want[n+"-"+node] = true // a static pod's name
	}
	for deadline := time.Now().Add(5 * time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		select {
		case <-exited:
			Fail(who + " exited; log: " + logPath)
		default:
		}
		cs, err := rt.ListContainers(ctx, &runtimeapi.ContainerFilter{
			State:         &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
			LabelSelector: labels})
		Check(err)
		var out []time.Duration
		var found []*runtimeapi.Container
		for _, c := range cs {
			if !want[c.Labels[cri.LabelPodName]] {
				continue
			}
			st, err := rt.ContainerStatus(ctx, c.Id)
			Check(err)
			out = append(out, time.Unix(0, st.StartedAt).Sub(t0))
			found = append(found, c)
		}
		if len(out) == len(names) {
			return out, found
		}
	}
	Fail(fmt.Sprintf("the pods of %s did not start within 5 minutes; log: %s", who, logPath))
	return nil, nil
}

// RemoveAll deletes the manifests written so far, waits until the kubelet
// has stopped their containers, then removes the stopped sandboxes
// through its runtime (the kubelet's own collection would take a minute
// or more): each side starts its next turn on an empty runtime.
func (k *Kubelet) RemoveAll() {
	for _, n := range k.written {
		os.Remove(filepath.Join(k.Manifests, n+".yaml"))
	}
	k.written = nil
	ctx := context.Background()
	for i := 0; i < 1200; i++ {
		sbs, err := k.RT.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{
			State: &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY}})
		if err == nil && len(sbs) == 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	Check(k.Runtime.RemovePods(ctx))
}

// Close stops the kubelet and its runtime, leaves the host as it was and
// removes the directory.
func (k *Kubelet) Close() {
	k.RT.Close()
	err := k.Stop()
	if err == nil {
		err = os.RemoveAll(k.Dir)
	}
	if err != nil {
		fmt.Println("bench: after the kubelet:", err)
	}
}

// Watch samples the kubelet's RSS every second and its CPU time over d.
func (k *Kubelet) Watch(d time.Duration) (rss []int64, cpu time.Duration) { return watch(k.Pid(), d) }

// HeapInUse is the least of three readings of the kubelet's
// go_memstats_heap_inuse_bytes on its read-only port.
func (k *Kubelet) HeapInUse() float64 {
	return leastOfThree(func() (Metrics, error) { return Scrape(k.ReadOnlyURL("/metrics", 0)) })
}

var errNoMetric = errors.New("no go_memstats_heap_inuse_bytes")

func leastOfThree(get func() (Metrics, error)) float64 {
	least := -1.0
	for i := 0; i < 3; i++ {
		if i > 0 {
			time.Sleep(time.Second)
		}
		m, err := get()
		Check(err)
		v, ok := m["go_memstats_heap_inuse_bytes"]
		if !ok {
			Check(errNoMetric)
		}
		if least < 0 || v < least {
			least = v
		}
	}
	return least
}

// Scrape reads a Prometheus text page at url.
func Scrape(url string) (Metrics, error) {
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", url, resp.Status)
	}
	return parseMetrics(resp.Body)
}
