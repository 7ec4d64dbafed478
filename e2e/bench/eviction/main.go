// Command eviction is the eviction part of `make bench`. A node whose pods
// may use 1 GiB in all (kubeReserved takes the rest), with a hard
// allocatableMemory.available<300Mi threshold, runs an innocent Guaranteed
// pod. Then, run after run, a BestEffort memhog grows at a given rate until
// it is evicted. Each decision's trace gives the latencies: detection
// (kernel notification → manager awake), decision (awake → victims chosen),
// notification → kill sent, and kill sent → memory drained. Kernel OOM kills
// on the node are counted from /proc/vmstat. Then the experiments'
// scenarios (the 1 GiB/s bomb, alone and on a busy node) run against
// nodeagent, the kubelet and earlyoom alike and are set side by side. It
// reports; it asserts nothing.
package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"nodeagent/agent/node"
	"nodeagent/cri"
	"nodeagent/e2e/bench/benchkit"
	"nodeagent/eviction"
)

var (
	env      = benchkit.Flags()
	runs     = flag.Int("runs", 20, "hogs per rate (0: no traced part)")
	rates    = flag.String("rates", "100,0", "hog growth rates in MiB/s (0: as fast as it can)")
	nodeName = "bench-eviction-" + strconv.Itoa(os.Getpid())
)

type sample struct {
	detect, decide, toKill, drain time.Duration
	event                         bool // woken by the kernel notification, not the poll
}

func main() {
	flag.Parse()
	rt := env.Connect()
	defer rt.Close()
	if *runs > 0 {
		traced(rt)
	}
	ctx, done := benchkit.Interruptible()
	defer done()
	sideBySide(ctx)
}

// traced is the nodeagent part: hogs at each rate, latencies from its
// decisions' traces.
func traced(rt *cri.Client) {

	machine, err := node.ReadMachine("/")
	benchkit.Check(err)
	reserved := machine.MemoryBytes - 1<<30
	a := env.StartAgent(rt, nodeName, fmt.Sprintf(
		"kubeReserved: {memory: \"%d\"}\nevictionHard: {allocatableMemory.available: 300Mi}\nevictionPressureTransitionPeriod: 1s\n", reserved))
	a.WritePod("innocent", env.Image, 2, `    command: [sh, -c, "while true; do sleep 1 & wait $!; done"]
    resources: {limits: {cpu: 100m, memory: 64Mi}}
`)
	waitPhase(a, "innocent", corev1.PodRunning)

	type row struct {
		rate    string
		samples []sample
		oom     int64
	}
	var rows []row
	for _, r := range strings.Split(*rates, ",") {
		label := r + " MiB/s"
		if r == "0" {
			label = "max speed"
		}
		benchkit.Progress(fmt.Sprintf("%d hogs at %s", *runs, label))
		oomBefore := vmstatOOMKills()
		var samples []sample
		for i := 0; i < *runs; i++ {
			waitNoPressure(a) // else admission refuses the BestEffort hog
			name := fmt.Sprintf("hog-%s-%d", r, i)
			a.WritePod(name, env.Image, 30, fmt.Sprintf("    command: [memhog, --mb, \"2000\", --rate, %q]\n", r))
			waitPhase(a, name, corev1.PodFailed)
			samples = append(samples, lastSample(a, name))
			benchkit.Check(os.Remove(a.Dir + "/manifests/" + name + ".yaml"))
			waitGone(a, name)
		}
		rows = append(rows, row{rate: label, samples: samples, oom: vmstatOOMKills() - oomBefore})
	}
	var innocent corev1.Pod
	for _, p := range listPods(a) {
		if strings.HasPrefix(p.Name, "innocent-") {
			innocent = p
		}
	}

	fmt.Println()
	fmt.Println("BestEffort hog in a 1 GiB kubepods, allocatableMemory.available<300Mi; latencies from each decision's trace")
	fmt.Printf("%-10s %4s %6s %22s %22s %22s %22s %9s\n", "rate", "n", "event", "detect p50/p99", "decide p50/p99", "notify->kill p50/p99", "kill->drained p50/p99", "OOM kills")
	for _, r := range rows {
		var detect, decide, toKill, drain []time.Duration
		events := 0
		for _, s := range r.samples {
			if s.event {
				events++
				detect = append(detect, s.detect)
				toKill = append(toKill, s.toKill)
			}
			decide = append(decide, s.decide)
			if s.drain > 0 {
				drain = append(drain, s.drain)
			}
		}
		pp := func(d []time.Duration) string {
			if len(d) == 0 {
				return "-"
			}
			return fmt.Sprintf("%s / %s", us(benchkit.Percentile(d, 50)), us(benchkit.Percentile(d, 99)))
		}
		fmt.Printf("%-10s %4d %6d %22s %22s %22s %22s %9d\n", r.rate, len(r.samples), events, pp(detect), pp(decide), pp(toKill), pp(drain), r.oom)
	}
	restarts, last := int32(-1), "none"
	if len(innocent.Status.ContainerStatuses) > 0 {
		cs := innocent.Status.ContainerStatuses[0]
		restarts = cs.RestartCount
		if t := cs.LastTerminationState.Terminated; t != nil {
			last = fmt.Sprintf("%s (exit %d) %s", t.Reason, t.ExitCode, strings.TrimSpace(t.Message))
		}
	}
	fmt.Printf("innocent Guaranteed pod: phase %s, restarts %d, last termination: %s\n", innocent.Status.Phase, restarts, last)
	fmt.Println("targets: detection p99 <= 10 ms (v1 eventfd), decision p99 <= 5 ms, no kernel OOM kill of a Guaranteed container")
	a.RemoveAll(os.Getenv("BENCH_KEEP") == "")
}

func us(d time.Duration) string {
	if d >= time.Millisecond {
		return d.Round(10 * time.Microsecond).String()
	}
	return d.Round(time.Microsecond).String()
}

func listPods(a *benchkit.Agent) []corev1.Pod {
	var list corev1.PodList
	benchkit.Check(a.Get("/pods", &list))
	return list.Items
}

func find(a *benchkit.Agent, name string) *corev1.Pod {
	for _, p := range listPods(a) {
		if p.Name == name+"-"+a.Node {
			return &p
		}
	}
	return nil
}

func waitPhase(a *benchkit.Agent, name string, phase corev1.PodPhase) {
	for deadline := time.Now().Add(3 * time.Minute); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		select {
		case <-a.Exited():
			benchkit.Fail("the agent exited; log: " + a.LogPath())
		default:
		}
		if p := find(a, name); p != nil && p.Status.Phase == phase {
			return
		}
	}
	benchkit.Fail(fmt.Sprintf("pod %s never reached %s; log: %s", name, phase, a.LogPath()))
}

func waitNoPressure(a *benchkit.Agent) {
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		var n corev1.Node
		benchkit.Check(a.Get("/node", &n))
		pressure := false
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeMemoryPressure && c.Status == corev1.ConditionTrue {
				pressure = true
			}
		}
		if !pressure {
			return
		}
	}
	benchkit.Fail("MemoryPressure did not clear")
}

func waitGone(a *benchkit.Agent, name string) {
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if find(a, name) == nil {
			return
		}
	}
	benchkit.Fail("pod " + name + " was not removed")
}

// lastSample reads the trace that evicted the pod, waiting for its drain.
func lastSample(a *benchkit.Agent, name string) sample {
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		var traces []eviction.Trace
		benchkit.Check(a.Get("/evictions", &traces))
		for i := len(traces) - 1; i >= 0; i-- {
			t := traces[i]
			if len(t.Victims) == 0 || !strings.HasPrefix(t.Victims[0].Pod, "default/"+name+"-") {
				continue
			}
			if t.FreedAt.IsZero() && time.Now().Before(deadline.Add(-25*time.Second)) {
				break // wait a little for the drain
			}
			s := sample{decide: t.DecidedAt.Sub(t.WokeAt)}
			if !t.TriggeredAt.IsZero() {
				s.event = true
				s.detect = t.WokeAt.Sub(t.TriggeredAt)
				s.toKill = t.KillSentAt.Sub(t.TriggeredAt)
			}
			if !t.FreedAt.IsZero() {
				s.drain = t.FreedAt.Sub(t.KillSentAt)
			}
			return s
		}
	}
	benchkit.Fail("no eviction trace for " + name)
	return sample{}
}

func vmstatOOMKills() int64 {
	b, err := os.ReadFile("/proc/vmstat")
	benchkit.Check(err)
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "oom_kill "); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return 0
}
