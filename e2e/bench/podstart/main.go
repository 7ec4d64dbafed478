// Command podstart is `make bench`: pod start latency through nodeagent
// against a floor of the same work done by direct CRI calls in the same run
// (RunPodSandbox + CreateContainer + StartContainer), for one pod at a time
// (also against a second floor making the same calls with the agent's own
// configs, each pod's path split at the runtime's timestamps) and for a
// batch of 110, the kubelet's density shape; then the agent's RSS, Go heap
// and CPU time with no pods and with the batch idle, per pod.
// Latency runs from the moment the manifest is written (or the pod created
// in the API, or the first CRI call made) to the container's start time as
// the runtime records it, with the image already present. The API-server
// mode side also measures when the API shows the pod running, the agent's
// requests to the API per pod start, and its footprint with 100 pods idle.
// It reports; it asserts nothing.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"nodeagent/cri"
	"nodeagent/e2e/bench/benchkit"
)

var (
	progress = benchkit.Progress
	fail     = benchkit.Fail
	check    = benchkit.Check
	mib      = benchkit.MiB
	pctD     = benchkit.Percentile
	pct      = benchkit.Pct
)

var (
	env      = benchkit.Flags()
	singles  = flag.Int("singles", 20, "pods started one at a time, per side")
	batch    = flag.Int("batch", 110, "pods started at once, per side (110: the kubelet's maxPods, the shape of its density test)")
	idle     = flag.Duration("idle", 60*time.Second, "how long to watch the agent with the pods idle")
	apiIdle  = flag.Int("api-idle-pods", 100, "pods the API-server mode agent idles with")
	profiles = flag.String("profile-dir", "", "save CPU and heap profiles of the agents, taken while their pods idle, into this directory")
	cpBin    = flag.String("controlplane", os.Getenv("CONTROLPLANE_BIN"), "bin/controlplane, for the API-server mode side; empty skips it")
	// The kubelet side: the real kubelet on a containerd of its own.
	kubeletBin, runtimeBin = benchkit.PeerFlags()
	node                   = "bench-" + strconv.Itoa(os.Getpid())
	// emptyIdle is how long the agent is watched with no pods, the base the
	// per-pod footprint is taken from.
	emptyIdle = 20 * time.Second
	floorRoot = "/nodeagent-bench-floor"
)

func main() {
	flag.Parse()
	ctx := context.Background()
	rt := env.Connect()
	defer rt.Close()
	if img, err := rt.ImageStatus(ctx, env.Image); err != nil || img == nil {
		fmt.Println("pulling", env.Image)
		_, err := rt.PullImage(ctx, env.Image, nil, nil)
		check(err)
	}
	f := &floor{rt: rt}
	defer f.cleanup(ctx)
	benchkit.AtFail(func() { f.cleanup(context.Background()) })
	progress("warming up the runtime (first sandbox after a start is slow)")
	_, err := f.start(ctx, "warmup")
	check(err)

	extra := ""
	if *profiles != "" {
		check(os.MkdirAll(*profiles, 0o755))
		extra = "enableProfilingHandler: true\n"
	}
	a := &agent{env.StartAgent(rt, node, extra)}
	progress(fmt.Sprintf("nodeagent: no pods, idle for %s", emptyIdle))
	var agentFoot, kubeletFoot footprint
	agentFoot.empty(a.Watch, a.Pid(), a.HeapInUse)
	k := benchkit.StartKubelet(*kubeletBin, *runtimeBin, env.Image, "bench-kubelet-"+strconv.Itoa(os.Getpid()), "", "")
	if k != nil {
		defer k.Close()
		progress(fmt.Sprintf("kubelet: no pods, idle for %s (the first pod warms its runtime up first)", emptyIdle))
		k.Write("warmup", podManifest("warmup"))
		k.WaitStarted(ctx, []string{"warmup"}, time.Now())
		k.RemoveAll()
		kubeletFoot.empty(k.Watch, k.Pid(), k.HeapInUse)
	}

	// One at a time, the three sides take turns, so that each sees the
	// runtime in the same state (a runtime that just removed 110 pods
	// is slower for a while).
	progress(fmt.Sprintf("%d pods one at a time: direct CRI, direct CRI with the agent's configs, nodeagent, the kubelet in turn", *singles))
	cf := newConfigFloor(&floor{rt: rt})
	benchkit.AtFail(func() { cf.cleanup(context.Background()) })
	var floorSingle, configSingle, agentSingle, kubeletSingle []time.Duration
	var floorPhases, configPhases, agentPhases, kubeletPhases phases
	for i := 0; i < *singles; i++ {
		name := fmt.Sprintf("single-%d", i)
		t0 := time.Now()
		d, err := f.startSince(ctx, name, t0)
		check(err)
		floorSingle = append(floorSingle, d)
		floorPhases.add(ctx, rt, f.lastSandbox, f.lastContainer, t0)

		t0 = time.Now()
		d, err = cf.start(ctx, name, t0)
		check(err)
		configSingle = append(configSingle, d)
		configPhases.add(ctx, rt, cf.lastSandbox, cf.lastContainer, t0)

		t0 = time.Now()
		a.write(name)
		ds, cs := a.waitStarted(ctx, []string{name}, t0)
		agentSingle = append(agentSingle, ds...)
		agentPhases.add(ctx, rt, cs[0].PodSandboxId, cs[0].Id, t0)

		if k != nil {
			t0 = time.Now()
			k.Write(name, podManifest(name))
			ds, cs := k.WaitStarted(ctx, []string{name}, t0)
			kubeletSingle = append(kubeletSingle, ds...)
			kubeletPhases.add(ctx, k.RT, cs[0].PodSandboxId, cs[0].Id, t0)
		}
	}
	progress("removing the single pods")
	a.RemoveAll(false)
	if k != nil {
		k.RemoveAll()
	}
	cf.cleanup(ctx)
	f.cleanup(ctx)
	progress(fmt.Sprintf("direct CRI: a batch of %d pods", *batch))
	floorBatch := f.startBatch(ctx, *batch)
	f.cleanup(ctx)
	progress(fmt.Sprintf("nodeagent: a batch of %d pods", *batch))
	var names []string
	t0 := time.Now()
	for i := 0; i < *batch; i++ {
		name := fmt.Sprintf("batch-%d", i)
		names = append(names, name)
		a.write(name)
	}
	agentBatch, _ := a.waitStarted(ctx, names, t0)

	progress(fmt.Sprintf("nodeagent: %d pods idle for %s", *batch, *idle))
	if *profiles != "" {
		go a.SaveProfile(*idle-2*time.Second, filepath.Join(*profiles, "standalone-idle-cpu.pprof"))
	}
	agentFoot.idle(a.Watch, a.Pid(), a.HeapInUse)
	if *profiles != "" {
		a.SaveHeapProfile(filepath.Join(*profiles, "standalone-idle-heap.pprof"))
	}
	progress("nodeagent: removing the pods")
	a.RemoveAll(false)
	var kubeletBatch []time.Duration
	if k != nil {
		// nodeagent stays up with no pods, as the kubelet did for its turn.
		kubeletBatch = kubeletBatchAndIdle(ctx, k, &kubeletFoot)
		k.Close()
		k = nil
	}
	a.RemoveAll(true)

	var api *apiResults
	if *cpBin != "" {
		api = measureAPI(ctx, rt)
	}

	fmt.Println()
	fmt.Println("Pod start latency: manifest written (or first CRI call) -> container started; image present")
	fmt.Printf("%-28s %5s %9s %9s %9s %9s\n", "scenario", "n", "p50", "p90", "p99", "max")
	row := func(name string, d []time.Duration) {
		fmt.Printf("%-28s %5d %9s %9s %9s %9s\n", name, len(d), pct(d, 50), pct(d, 90), pct(d, 99), pct(d, 100))
	}
	row("direct CRI, one at a time", floorSingle)
	row("  with the agent's configs", configSingle)
	row("nodeagent, one at a time", agentSingle)
	if kubeletSingle != nil {
		row("kubelet, one at a time", kubeletSingle)
	}
	if api != nil {
		row("API mode, one at a time", api.single)
	}
	row(fmt.Sprintf("direct CRI, batch of %d", *batch), floorBatch)
	row(fmt.Sprintf("nodeagent, batch of %d", *batch), agentBatch)
	if kubeletBatch != nil {
		row(fmt.Sprintf("kubelet, batch of %d", *batch), kubeletBatch)
	}
	if api != nil {
		row(fmt.Sprintf("API mode, batch of %d", *batch), api.batch)
	}
	fmt.Println()
	fmt.Println("One pod's path, split at the runtime's timestamps (p50 / p99): before the sandbox's creation (the agent:")
	fmt.Println("the manifest read, admission, the pod cgroup), sandbox with its network to the container's creation, creation to start")
	for _, p := range []struct {
		name string
		ph   phases
	}{{"direct CRI", floorPhases}, {"  + configs", configPhases}, {"nodeagent", agentPhases}, {"kubelet", kubeletPhases}} {
		if p.ph.before == nil {
			continue
		}
		fmt.Printf("  %-12s %9s / %-9s %9s / %-9s %9s / %-9s\n", p.name, pct(p.ph.before, 50), pct(p.ph.before, 99),
			pct(p.ph.sandbox, 50), pct(p.ph.sandbox, 99), pct(p.ph.create, 50), pct(p.ph.create, 99))
	}
	ratio := func(a, b []time.Duration, p float64) string {
		return fmt.Sprintf("%.2f", float64(pctD(a, p))/float64(pctD(b, p)))
	}
	fmt.Println()
	fmt.Println("Overhead ratio nodeagent / direct CRI (target <= 1.2)")
	fmt.Printf("  one at a time: p50 %s  p99 %s\n", ratio(agentSingle, floorSingle, 50), ratio(agentSingle, floorSingle, 99))
	fmt.Printf("  one at a time, against the floor with the agent's configs: p50 %s  p99 %s\n", ratio(agentSingle, configSingle, 50), ratio(agentSingle, configSingle, 99))
	fmt.Printf("  batch of %d:   p50 %s  p99 %s\n", *batch, ratio(agentBatch, floorBatch, 50), ratio(agentBatch, floorBatch, 99))
	if api != nil {
		fmt.Println("Overhead ratio API mode / direct CRI")
		fmt.Printf("  one at a time: p50 %s  p99 %s\n", ratio(api.single, floorSingle, 50), ratio(api.single, floorSingle, 99))
		fmt.Printf("  batch of %d:   p50 %s  p99 %s\n", *batch, ratio(api.batch, floorBatch, 50), ratio(api.batch, floorBatch, 99))
	}
	if kubeletSingle != nil {
		fmt.Println("Ratio nodeagent / kubelet (below 1: nodeagent is faster)")
		fmt.Printf("  one at a time: p50 %s  p99 %s\n", ratio(agentSingle, kubeletSingle, 50), ratio(agentSingle, kubeletSingle, 99))
		fmt.Printf("  batch of %d:   p50 %s  p99 %s\n", *batch, ratio(agentBatch, kubeletBatch, 50), ratio(agentBatch, kubeletBatch, 99))
	}
	fmt.Println()
	printFootprints(agentFoot, kubeletFoot)
	if *profiles != "" {
		fmt.Printf("  profiles: %s (go tool pprof -top FILE)\n", *profiles)
	}
	if api != nil {
		api.print(floorBatch, agentBatch)
	} else {
		fmt.Println("\nAPI-server mode: skipped (no -controlplane / CONTROLPLANE_BIN)")
	}
}

// floor starts pods with bare CRI calls, as the agent would.
type floor struct {
	rt      *cri.Client
	mu      sync.Mutex
	sandbox []string
	// lastSandbox and lastContainer are the latest start's, for phases.
	lastSandbox, lastContainer string
}

// phases splits single pod starts at the runtime's own timestamps: from
// t0 to the sandbox's creation, to the container's creation, to its start.
type phases struct{ before, sandbox, create []time.Duration }

func (p *phases) add(ctx context.Context, rt *cri.Client, sandboxID, containerID string, t0 time.Time) {
	sb, err := rt.PodSandboxStatus(ctx, sandboxID)
	check(err)
	st, err := rt.ContainerStatus(ctx, containerID)
	check(err)
	sbAt, createdAt, startedAt := time.Unix(0, sb.CreatedAt), time.Unix(0, st.CreatedAt), time.Unix(0, st.StartedAt)
	p.before = append(p.before, sbAt.Sub(t0))
	p.sandbox = append(p.sandbox, createdAt.Sub(sbAt))
	p.create = append(p.create, startedAt.Sub(createdAt))
}

// start runs one pod and returns its container's start time minus t0.
func (f *floor) start(ctx context.Context, name string) (time.Duration, error) {
	return f.startSince(ctx, name, time.Now())
}

func (f *floor) startSince(ctx context.Context, name string, t0 time.Time) (time.Duration, error) {
	uid := fmt.Sprintf("floor-%d-%s", os.Getpid(), name)
	sbCfg := &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: name, Namespace: "bench", Uid: uid},
		Hostname:     name,
		LogDirectory: filepath.Join(os.TempDir(), "nodeagent-bench-floor", uid),
		Labels:       map[string]string{"bench": "floor"},
		Linux:        &runtimeapi.LinuxPodSandboxConfig{CgroupParent: floorRoot + "/pod" + uid},
	}
	return f.run(ctx, sbCfg, &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "main"},
		Image:    &runtimeapi.ImageSpec{Image: env.Image},
		Command:  []string{"sleep", "3600"},
		LogPath:  "main/0.log",
		Linux:    &runtimeapi.LinuxContainerConfig{Resources: &runtimeapi.LinuxContainerResources{CpuShares: 10, MemoryLimitInBytes: 64 << 20, OomScoreAdj: 999}},
	}, t0)
}

// run makes the three CRI calls for one pod and returns its container's
// start time minus t0.
func (f *floor) run(ctx context.Context, sbCfg *runtimeapi.PodSandboxConfig, cfg *runtimeapi.ContainerConfig, t0 time.Time) (time.Duration, error) {
	id, err := f.rt.RunPodSandbox(ctx, sbCfg, "")
	if err != nil {
		return 0, err
	}
	f.mu.Lock()
	f.sandbox = append(f.sandbox, id)
	f.mu.Unlock()
	cid, err := f.rt.CreateContainer(ctx, id, cfg, sbCfg)
	if err != nil {
		return 0, err
	}
	if err := f.rt.StartContainer(ctx, cid); err != nil {
		return 0, err
	}
	f.mu.Lock()
	f.lastSandbox, f.lastContainer = id, cid
	f.mu.Unlock()
	st, err := f.rt.ContainerStatus(ctx, cid)
	if err != nil {
		return 0, err
	}
	return time.Unix(0, st.StartedAt).Sub(t0), nil
}

func (f *floor) startBatch(ctx context.Context, n int) []time.Duration {
	var wg sync.WaitGroup
	out := make([]time.Duration, n)
	t0 := time.Now()
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Batch latency counts from the start of the batch, as for the agent.
			d, err := f.startSince(ctx, fmt.Sprintf("batch-%d", i), t0)
			check(err)
			out[i] = d
		}()
	}
	wg.Wait()
	return out
}

func (f *floor) cleanup(ctx context.Context) {
	f.mu.Lock()
	ids := f.sandbox
	f.sandbox = nil
	f.mu.Unlock()
	// And those whose start timed out here but went on in the runtime.
	for _, labels := range []map[string]string{{"bench": "floor"}, {cri.LabelManagedBy: "floor-configs"}} {
		sbs, _ := f.rt.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: labels})
		for _, sb := range sbs {
			ids = append(ids, sb.Id)
		}
	}
	for _, id := range ids {
		f.rt.StopPodSandbox(ctx, id)
		f.rt.RemovePodSandbox(ctx, id)
	}
	exec.Command("sh", "-c", "for d in /sys/fs/cgroup/*"+floorRoot+"; do find $d -depth -type d -exec rmdir {} + 2>/dev/null; done").Run()
	os.RemoveAll(filepath.Join(os.TempDir(), "nodeagent-bench-floor"))
}

// agent is a nodeagent under measurement, with the pods it was given.
type agent struct{ *benchkit.Agent }

func (a *agent) write(name string) { a.Write(name, podManifest(name)) }

// podManifest is every bench pod: Burstable, sleeping.
func podManifest(name string) string {
	return benchkit.PodManifest(name, env.Image, 2, `    command: ["sleep", "3600"]
    resources:
      requests: {cpu: 10m, memory: 16Mi}
      limits: {memory: 64Mi}
`)
}

// waitStarted returns, per pod, the container's start time minus t0, and
// the containers.
func (a *agent) waitStarted(ctx context.Context, names []string, t0 time.Time) ([]time.Duration, []*runtimeapi.Container) {
	return benchkit.WaitStarted(ctx, a.RT, map[string]string{cri.LabelManagedBy: a.Node}, a.Node, names, t0, a.Exited(), "nodeagent", a.LogPath())
}
