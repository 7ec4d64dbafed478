package experiment

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func scenarioFor(t *testing.T, agent string) *Scenario {
	t.Helper()
	f := filepath.Join(t.TempDir(), "s.yaml")
	os.WriteFile(f, []byte("name: bomb\nduration: 10s\nagent: {podsMemory: 1Gi, "+agent+"}\npods: [{name: bomb, memhog: {size: 2Gi}}]\n"), 0o644)
	s, err := Load(f, nodeMemory)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestWhatAppliesToWhichAgent(t *testing.T) {
	hard := "evictionHard: {allocatableMemory.available: 250Mi}"
	for _, tc := range []struct {
		agent, settings, want string // want "" = applies
	}{
		{"nodeagent", "evictionRanking: qos", ""},
		{"kubelet", hard, ""},
		{"kubelet", "evictionRanking: qos", "evictionRanking qos is nodeagent's"},
		{"earlyoom", hard, ""},
		{"earlyoom", "evictionHard: {memory.available: 100Mi}", ""},
		{"earlyoom", "evictionHard: {allocatableMemory.available: 10%}", "a quantity threshold is needed"},
		{"earlyoom", "evictionRanking: kubelet", "no hard memory threshold"},
		{"earlyoom", "evictionSoft: {memory.available: 1Gi}, evictionSoftGracePeriod: {memory.available: 10s}", "no soft thresholds"},
		{"oomd", hard, `unknown agent "oomd"`},
	} {
		err := Applies(scenarioFor(t, tc.settings), tc.agent)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s with %s: got %v, want %q", tc.agent, tc.settings, err, tc.want)
		}
	}
}

func TestEarlyoomRunsThePodsWithNodeagentsMemoryEvictionOff(t *testing.T) {
	s := scenarioFor(t, "evictionHard: {allocatableMemory.available: 250Mi}")
	got := earlyoomSettings(s, nodeMemory)
	for _, want := range []string{`kubeReserved: {memory: "16106127360"}`, `memory.available: "0%"`, `allocatableMemory.available: "0%"`} {
		if !strings.Contains(got, want) {
			t.Errorf("settings lack %q:\n%s", want, got)
		}
	}
	if m, err := hardMemoryMargin(s); err != nil || m != 250<<20 {
		t.Errorf("margin %d, %v; want 250Mi", m, err)
	}
}

// The outside-in latencies: the crossing is the first sample with the
// pods past their memory less the margin; the kill, the first sample
// after it where a pod's working set halved or its cgroup went; the
// status, the first pod end seen after it.
func TestCrossingToKillAndToStatusFromOutside(t *testing.T) {
	s := scenarioFor(t, "evictionHard: {allocatableMemory.available: 250Mi}")
	r := Run{StatusSeen: map[string]float64{"early": 0.1, "bomb": 1.25}}
	ws := []int64{100, 500, 780, 900, 950, 40} // MiB of the bomb; the crossing is past 774
	for i, w := range ws {
		smp := Sample{T: float64(i) * 0.1, PodsWorkingSet: (w + 64) << 20, Pods: map[string]PodSample{"bomb": {WorkingSet: w << 20}, "g": {WorkingSet: 64 << 20}}}
		r.Samples = append(r.Samples, smp)
	}
	toKill, toStatus, before := fromOutside(s, r, 1<<30)
	if before {
		t.Errorf("a run that crossed is not killed before the crossing")
	}
	// Crossed at 0.2 s (780+64 MiB > 774), killed at 0.5 s, status at 1.25 s.
	if len(toKill) != 1 || toKill[0] < 299 || toKill[0] > 301 {
		t.Errorf("crossing to kill %v, want 300 ms", toKill)
	}
	if len(toStatus) != 1 || toStatus[0] < 1049 || toStatus[0] > 1051 {
		t.Errorf("crossing to status %v, want 1050 ms (the end seen before the crossing does not count)", toStatus)
	}
	// A cgroup that vanishes is a kill too.
	r.Samples[5].Pods = map[string]PodSample{"g": {WorkingSet: 64 << 20}}
	if toKill, _, _ := fromOutside(s, r, 1<<30); len(toKill) != 1 || toKill[0] < 299 || toKill[0] > 301 {
		t.Errorf("with the cgroup gone: crossing to kill %v, want 300 ms", toKill)
	}
	// Never crossed: nothing measured, and no kill before it.
	if toKill, toStatus, before := fromOutside(s, Run{Samples: r.Samples[:2]}, 1<<30); toKill != nil || toStatus != nil || before {
		t.Errorf("never crossed: got %v %v %v", toKill, toStatus, before)
	}
	// Killed at 700 MiB, under the threshold: killed before the crossing.
	early := Run{}
	for i, w := range []int64{100, 500, 700, 10} {
		early.Samples = append(early.Samples, Sample{T: float64(i) * 0.1, PodsWorkingSet: (w + 64) << 20, Pods: map[string]PodSample{"bomb": {WorkingSet: w << 20}}})
	}
	if toKill, _, before := fromOutside(s, early, 1<<30); toKill != nil || !before {
		t.Errorf("killed before the crossing: got %v, %v", toKill, before)
	}
}

func TestKernelKillsAreTimedByTheSamples(t *testing.T) {
	samples := []Sample{{T: 4.9}, {T: 5.31}, {T: 5.32, KernelOOMKills: 1}, {T: 9, KernelOOMKills: 1}}
	// The status said 5 s (whole seconds); the count rose at 5.32 s.
	events := timeKernelKills([]Event{{T: 5, Kind: "oom-kill", Pod: "bomb"}, {T: 5, Kind: "eviction", Pod: "x"}}, samples)
	if events[0].T != 5.32 || events[1].T != 5 {
		t.Errorf("got %+v, want the kernel kill at 5.32 s and the eviction untouched", events)
	}
	// No rise within 2 s: the time stays.
	if e := timeKernelKills([]Event{{T: 8, Kind: "oom-kill"}}, samples); e[0].T != 8 {
		t.Errorf("got %v, want 8", e[0].T)
	}
}

func TestPodUIDFromACgroupPath(t *testing.T) {
	for path, want := range map[string]string{
		"4:memory:/n/kubepods/besteffort/pod0f1e2d3c-4b5a-6978-8695-a4b3c2d1e0f9/abc\n": "0f1e2d3c-4b5a-6978-8695-a4b3c2d1e0f9",
		"4:memory:/n/kubepods/pod0f1e2d3c-4b5a-6978-8695-a4b3c2d1e0f9\n":                "0f1e2d3c-4b5a-6978-8695-a4b3c2d1e0f9",
		// A static pod's UID is a hash, not a UUID.
		"12:pids:/x\n4:memory:/n/kubepods/burstable/pod6b41423af3b2bdeeda34b6a73b50e8f7/c1\n": "6b41423af3b2bdeeda34b6a73b50e8f7",
		"4:memory:/user.slice\n": "",
	} {
		got := ""
		if m := podCgroup.FindStringSubmatch(path); m != nil {
			got = m[1]
		}
		if got != want {
			t.Errorf("%q: got %q, want %q", path, got, want)
		}
	}
}

func TestCompareSetsAgentsSideBySide(t *testing.T) {
	s := scenarioFor(t, "evictionHard: {allocatableMemory.available: 250Mi}")
	a := Summarize(s, fakeRuns())
	a.Agent = "nodeagent"
	k := Summarize(s, fakeRuns()[1:])
	k.Agent = "kubelet"
	e := Summary{Scenario: "bomb", Agent: "earlyoom", NotApplicable: "no soft thresholds"}
	var b bytes.Buffer
	if err := Compare(&b, []string{"na", "kl", "eo"}, []*Summary{&a, &k, &e}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"nodeagent", "kubelet", "does not apply: no soft thresholds", "runs with a kernel OOM kill", "1 of 2", "1 of 1", "crossing to kill p50 / p99 (ms)"} {
		if !strings.Contains(out, want) {
			t.Errorf("compare lacks %q:\n%s", want, out)
		}
	}
}

func TestNotApplicableIsAReportNotAFailure(t *testing.T) {
	s := scenarioFor(t, "evictionRanking: qos")
	out := t.TempDir()
	runs, err := Execute(t.Context(), s, Env{Agent: "kubelet"}, out, nodeMemory, nil)
	if err != nil || runs != nil {
		t.Fatalf("got %v runs, %v; want none and no error", runs, err)
	}
	sum, err := ReadSummary(out)
	if err != nil || !strings.Contains(sum.NotApplicable, "qos") || sum.Agent != "kubelet" {
		t.Fatalf("summary %+v, %v", sum, err)
	}
	report, _ := os.ReadFile(filepath.Join(out, "report.md"))
	if !strings.Contains(string(report), "Does not apply to kubelet") {
		t.Errorf("report: %s", report)
	}
}
