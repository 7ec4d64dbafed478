package experiment

import (
	"encoding/xml"
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
	if len(files) < 7 {
		t.Fatalf("want the 7 built-in scenarios, found %v", files)
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
		{base + "pods: [{name: a, memhog: {size: 1Mi}, pageCache: {size: 1Mi}}]\n", "pods[0]: memhog and pageCache both set"},
		{base + "pods: [{name: a, requests: {memory: 2Gi}, limits: {memory: 1Gi}}]\n", "pods[0].requests.memory: 2Gi is more than the limit 1Gi"},
		{base + "pods: [{name: a, requests: {memory: 600Mi}}, {name: b, requests: {memory: 600Mi}}]\n", "more than the 1Gi left to pods"},
		{base + "pods: [{name: a, memhog: {size: 1Mi, pattern: burst}}]\n", `pods[0].memhog.pattern: "burst": want hold, grow or leak`},
		{"name: x\nduration: 10s\nagent: {evictionRanking: random}\npods: [{name: a}]\n", `agent.evictionRanking: "random": want kubelet or qos`},
		{base + "pods: []\n", "pods: at least one pod is needed"},
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
		KillSentAt: start.Add(5*time.Second + 4*time.Millisecond), FreedAt: start.Add(5*time.Second + 400*time.Millisecond)}
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
