package experiment

import (
	"encoding/xml"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"nodeagent/eviction"
)

const nodeMemory = 16 << 30

func TestBuiltInScenariosLoad(t *testing.T) {
	files, _ := filepath.Glob("../../examples/experiments/*.yaml")
	if len(files) < 9 {
		t.Fatalf("want the 9 built-in scenarios, found %v", files)
	}
	for _, f := range files {
		if _, err := Load(f, nodeMemory); err != nil {
			t.Errorf("%v", err)
		}
	}
}

func TestBadScenariosAreRefusedWithTheFieldPath(t *testing.T) {
	base := "name: x\nduration: 10s\nagent: {podsMemory: 1Gi}\n"
	for _, tc := range []struct{ body, want string }{
		{base + "pods: [{name: a, memhog: {size: 1Gi}}]\nrepetitons: 3\n", `unknown field "repetitons"`},
		{base + "pods: [{name: a, memhog: {size: 1Gi, sise: 2}}]\n", `unknown field "pods[0].memhog.sise"`},
		{base + "pods: [{name: a, memhog: {size: 64Gi}}]\n", "pods[0].memhog.size: 64Gi: more than the node's 16Gi"},
		{"name: x\nduration: 10s\nagent: {podsMemory: 20Gi}\npods: [{name: a}]\n", "agent.podsMemory: 20Gi: more than the node's 16Gi"},
		{base + "pods: [{name: a, qos: Guaranteed, requests: {memory: 1Mi}}]\n", "pods[0].qos: Guaranteed, but its requests and limits make it Burstable"},
		{base + "pods: [{name: a, memhog: {size: 1Mi}, pageCache: {size: 1Mi}}]\n", "pods[0]: memhog and pageCache set: a pod has one workload"},
		{base + "pods: [{name: a, memhog: {size: 1Mi}, load: {cpuWorkers: 1}}]\n", "pods[0]: load and memhog set"},
		{base + "pods: [{name: a, load: {cpuWorkers: -1}}]\n", "pods[0].load.cpuWorkers: -1: want 0.."},
		{base + "pods: [{name: a}]\nhostLoad: {cpuWorkers: 100000}\n", "hostLoad.cpuWorkers: 100000: want 0.."},
		{base + "pods: [{name: a}]\nhostLoad: {diskWriters: 1, diskWriteSize: 1Ki}\n", "hostLoad.diskWriteSize: 1Ki: want 1Mi..64Gi"},
		{base + "pods: [{name: a}]\nhostLoad: {cpuWorkers: 1, nice: 40}\n", "hostLoad.nice: 40: want -20..19"},
		{base + "pods: [{name: a, load: {cpuWorkers: 1, nice: 5}}]\n", "pods[0].load.nice: 5: only the host load has a niceness"},
		{base + "pods: [{name: a}]\nhostLoad: {nice: 5}\n", "hostLoad: no load"},
		{base + "pods: [{name: a}]\nhostLoad: {pageCacheChurn: 64Gi}\n", "hostLoad.pageCacheChurn: 64Gi: want 0 to the node's 16Gi"},
		{base + "pods: [{name: a}]\nhostLoad: {cpuWorker: 1}\n", `unknown field "hostLoad.cpuWorker"`},
		{base + "pods: [{name: a, requests: {memory: 2Gi}, limits: {memory: 1Gi}}]\n", "pods[0].requests.memory: 2Gi is more than the limit 1Gi"},
		{base + "pods: [{name: a, requests: {memory: 600Mi}}, {name: b, requests: {memory: 600Mi}}]\n", "more than the 1Gi left to pods"},
		{base + "pods: [{name: a, memhog: {size: 1Mi, pattern: burst}}]\n", `pods[0].memhog.pattern: "burst": want hold, grow or leak`},
		{"name: x\nduration: 10s\nagent: {evictionRanking: random}\npods: [{name: a}]\n", `agent.evictionRanking: "random": want kubelet or qos`},
		{base + "pods: []\n", "pods: at least one pod is needed"},
		{base + "pods: [{name: a}]\nexpect: {evicted: [b]}\n", `expect.evicted[0]: "b": no pod group of that name`},
		{base + "pods: [{name: a}]\nexpect: {evicted: [a], survive: [a]}\n", `expect.survive[0]: "a": already in expect.evicted`},
		{base + "pods: [{name: a}]\nexpect: {kernelOOMKills: sometimes}\n", `expect.kernelOOMKills: "sometimes": want none, allowed or expected`},
		{base + "pods: [{name: a}]\nexpect: {evicted: [a], survived: [a]}\n", `unknown field "expect.survived"`},
	} {
		f := filepath.Join(t.TempDir(), "s.yaml")
		os.WriteFile(f, []byte(tc.body), 0o644)
		_, err := Load(f, nodeMemory)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), f) {
			t.Errorf("%q: got %v, want an error naming the file and %q", tc.body, err, tc.want)
		}
	}
}

func fakeRuns() []Run {
	start := time.Unix(1000, 0)
	trace := eviction.Trace{Signal: "allocatableMemory.available", TriggeredAt: start.Add(5 * time.Second), TriggeredBy: "memcg threshold",
		WokeAt: start.Add(5*time.Second + 100*time.Microsecond), DecidedAt: start.Add(5*time.Second + 2*time.Millisecond),
		KillSentAt: start.Add(5*time.Second + 4*time.Millisecond), FreedAt: start.Add(5*time.Second + 400*time.Millisecond),
		Victims: []eviction.Victim{{Pod: "default/bomb", KilledAt: start.Add(5*time.Second + 3*time.Millisecond)}}}
	var runs []Run
	for i := 1; i <= 2; i++ {
		r := Run{Index: i, Start: start, SampleHz: 99, Evictions: []eviction.Trace{trace}}
		for k := 0; k < 100; k++ {
			r.Samples = append(r.Samples, Sample{T: float64(k) / 10, PodsWorkingSet: int64(k) << 23, NodeWorkingSet: 1 << 30,
				Pods: map[string]PodSample{"bomb": {WorkingSet: int64(k) << 23}, "guaranteed <g>": {WorkingSet: 64 << 20}}})
		}
		r.Events = []Event{{T: 5.004, Kind: "eviction", By: "agent", Pod: "bomb"}}
		if i == 2 {
			r.Events = append(r.Events, Event{T: 7, Kind: "oom-kill", By: "kernel", Pod: "guaranteed <g>"})
			r.Samples[99].KernelOOMKills = 1
		}
		r.Pods = []PodOutcome{{Name: "bomb", QOS: "BestEffort", Fate: "evicted"}, {Name: "guaranteed <g>", QOS: "Guaranteed", Fate: map[bool]string{true: "oom-killed", false: "survived"}[i == 2]}}
		runs = append(runs, r)
	}
	return runs
}

func TestSummaryReportAndPlot(t *testing.T) {
	f := filepath.Join(t.TempDir(), "s.yaml")
	os.WriteFile(f, []byte("name: bomb\nduration: 10s\nagent: {podsMemory: 1Gi, evictionHard: {allocatableMemory.available: 250Mi}}\npods: [{name: bomb, memhog: {size: 2Gi}}]\n"), 0o644)
	s, err := Load(f, nodeMemory)
	if err != nil {
		t.Fatal(err)
	}
	runs := fakeRuns()
	sum := Summarize(s, runs)
	if d := sum.Latencies["decision"]; d.N != 2 || d.P50 < 1.8 || d.P50 > 2 {
		t.Errorf("decision latency %+v, want 2 samples of ~1.9 ms", d)
	}
	if d := sum.Latencies["detection"]; d.N != 2 || d.P50 != 0.1 {
		t.Errorf("detection latency %+v, want 0.1 ms", d)
	}
	if d := sum.Latencies["cgroup kill"]; d.N != 2 || d.P50 != 1 {
		t.Errorf("cgroup kill latency %+v, want 1 ms (decided to killedAt)", d)
	}
	verdict := map[string]bool{}
	for _, v := range sum.Verdicts {
		verdict[v.Check] = v.Pass
	}
	if verdict["no Guaranteed pod was killed"] || verdict["the agent acted before the kernel OOM killer (no kernel OOM kill)"] || !verdict["every run completed"] {
		t.Errorf("verdicts %+v", sum.Verdicts)
	}
	report := Report(s, sum)
	for _, want := range []string{"| 1 | bomb (agent, 5.00s)", "| 2 | bomb (agent, 5.00s), guaranteed <g> (kernel, 7.00s)", "FAIL: no Guaranteed pod was killed", "memory.svg"} {
		if !strings.Contains(report, want) {
			t.Errorf("report lacks %q:\n%s", want, report)
		}
	}
	svg := Plot(s, runs)
	var doc struct {
		XMLName xml.Name `xml:"svg"`
		Groups  []struct {
			ID    string `xml:"id,attr"`
			Lines []struct {
				Class  string `xml:"class,attr"`
				Series string `xml:"data-series,attr"`
				Points string `xml:"points,attr"`
			} `xml:"polyline"`
			Thresholds []struct{} `xml:"line"`
			Paths      []struct {
				Class string `xml:"class,attr"`
			} `xml:"path"`
		} `xml:"g"`
	}
	if err := xml.Unmarshal([]byte(svg), &doc); err != nil {
		t.Fatalf("memory.svg is not well-formed XML: %v", err)
	}
	if len(doc.Groups) != 2 {
		t.Fatalf("want a panel per run, got %d", len(doc.Groups))
	}
	series := map[string]bool{}
	for _, l := range doc.Groups[1].Lines {
		series[l.Series] = strings.Count(l.Points, ",") == 100
	}
	for _, want := range []string{"node working set", "all pods", "bomb", "guaranteed <g>"} {
		if !series[want] {
			t.Errorf("series %q missing or without its 100 points: %v", want, series)
		}
	}
	marks := map[string]int{}
	for _, p := range doc.Groups[1].Paths {
		marks[p.Class]++
	}
	if marks["eviction"] != 1 || marks["oom-kill"] != 1 {
		t.Errorf("markers %v, want one eviction and one OOM kill", marks)
	}
}

// A scenario's expect section becomes verdicts: which groups go first and
// in what order, which must survive, and what the kernel may do.
func TestExpectedOutcomeVerdicts(t *testing.T) {
	load := func(expect string) *Scenario {
		t.Helper()
		f := filepath.Join(t.TempDir(), "s.yaml")
		os.WriteFile(f, []byte("name: order\nduration: 10s\npods: [{name: low}, {name: high}, {name: g}]\n"+expect), 0o644)
		s, err := Load(f, nodeMemory)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	// Run 1 evicts low then high; run 2 high then low, and the kernel
	// kills g.
	runs := []Run{{Index: 1}, {Index: 2}}
	for i := range runs {
		runs[i].Pods = []PodOutcome{{Name: "low-0", Group: "low", Fate: "evicted"}, {Name: "high-0", Group: "high", Fate: "evicted"}, {Name: "g-0", Group: "g", Fate: "survived"}}
		runs[i].Events = []Event{{T: 1, Kind: "eviction", Pod: "low-0"}, {T: 2, Kind: "eviction", Pod: "high-0"}}
	}
	runs[1].Events = []Event{{T: 1, Kind: "eviction", Pod: "high-0"}, {T: 2, Kind: "eviction", Pod: "low-0"}, {T: 3, Kind: "oom-kill", Pod: "g-0"}}
	runs[1].Pods[2].Fate = "oom-killed"
	runs[1].Samples = []Sample{{KernelOOMKills: 1}}

	verdicts := func(s *Scenario) map[string]string {
		out := map[string]string{}
		for _, v := range Summarize(s, runs).Verdicts {
			out[v.Check] = fmt.Sprintf("%v %s", v.Pass, v.Detail)
		}
		return out
	}
	got := verdicts(load("expect: {evicted: [low, high], survive: [g]}\n"))
	for check, want := range map[string]string{
		"evicted first, in this order: low, high": "false 1 of 2 runs; run 2: evicted [high low]",
		"never killed: g":                         "false 1 of 2 runs; run 2: killed [g high low]",
		"the agent acted before the kernel OOM killer (no kernel OOM kill)": "false 1 of 2 runs; run 2: 1 kernel OOM kills",
	} {
		if got[check] != want {
			t.Errorf("%q = %q, want %q (all: %v)", check, got[check], want, got)
		}
	}
	got = verdicts(load("expect: {evicted: [low], kernelOOMKills: expected}\n"))
	if v := got["the kernel OOM killer acted (the scenario expects it)"]; v != "false 1 of 2 runs; run 1: no kernel OOM kill" {
		t.Errorf("kernel expected: %q (all: %v)", v, got)
	}
	if _, judged := got["the agent acted before the kernel OOM killer (no kernel OOM kill)"]; judged {
		t.Error("kernelOOMKills: expected still judges the agent-first check")
	}
	got = verdicts(load("expect: {kernelOOMKills: allowed}\n"))
	for check := range got {
		if strings.Contains(check, "kernel") {
			t.Errorf("kernelOOMKills: allowed still judges %q", check)
		}
	}
}

// An experiment whose runs failed, say on an unreachable runtime, must not
// pass a single verdict: a run that did not complete shows nothing.
func TestRunsThatDidNotCompleteFailEveryVerdict(t *testing.T) {
	f := filepath.Join(t.TempDir(), "s.yaml")
	os.WriteFile(f, []byte("name: x\nduration: 10s\npods: [{name: a}, {name: b}]\nexpect: {evicted: [a], survive: [b]}\n"), 0o644)
	s, err := Load(f, nodeMemory)
	if err != nil {
		t.Fatal(err)
	}
	const unreachable = "container runtime not reachable at unix:///run/containerd/containerd.sock"
	failed := []Run{{Index: 1, Error: unreachable}, {Index: 2, Error: unreachable}}
	sum := Summarize(s, failed)
	if len(sum.Verdicts) < 5 || len(sum.Failed()) != len(sum.Verdicts) {
		t.Fatalf("verdicts %+v: want every one failed", sum.Verdicts)
	}
	for _, v := range sum.Verdicts {
		if !strings.HasPrefix(v.Detail, "0 of 2 runs") {
			t.Errorf("%q: %q, want 0 of 2 runs", v.Check, v.Detail)
		}
	}
	if d := sum.Verdicts[len(sum.Verdicts)-1].Detail; !strings.Contains(d, unreachable) {
		t.Errorf("every run completed: %q, want the runs' error", d)
	}

	// One run of two failed: the other still counts, but no verdict passes.
	half := []Run{{Index: 1, Pods: []PodOutcome{{Name: "a-0", Group: "a", Fate: "evicted"}, {Name: "b-0", Group: "b", Fate: "survived"}},
		Events: []Event{{T: 1, Kind: "eviction", Pod: "a-0"}}}, {Index: 2, Error: unreachable}}
	for _, v := range Summarize(s, half).Verdicts {
		if v.Pass || !strings.HasPrefix(v.Detail, "1 of 2 runs; run 2") {
			t.Errorf("%q: pass %v %q, want a failure naming run 2", v.Check, v.Pass, v.Detail)
		}
	}
	if sum := Summarize(s, nil); len(sum.Failed()) != len(sum.Verdicts) {
		t.Errorf("no runs at all: %+v, want every verdict failed", sum.Verdicts)
	}
}
