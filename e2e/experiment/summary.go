package experiment

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"nodeagent/internal/qos"
)

// Summary is summary.json: per run who was killed, by whom, in which
// order, the latencies, and the verdicts; and the latencies across runs.
type Summary struct {
	Scenario  string          `json:"scenario"`
	Runs      []RunSummary    `json:"runs"`
	Latencies map[string]Dist `json:"latenciesMs"` // detection, decision, kill, reclaim
	Verdicts  []Verdict       `json:"verdicts"`
}

// RunSummary is one run's outcome.
type RunSummary struct {
	Run       int      `json:"run"`
	Kills     []Event  `json:"kills"` // in order
	Evicted   []string `json:"evicted"`
	OOMKilled []string `json:"oomKilled"`
	// Latencies of the agent's decisions, in milliseconds: from the kernel
	// notification to the agent awake (detection), to the decision, to the
	// first victim's processes killed through its cgroup (hard memory
	// thresholds only), to the kill sent, and to the victims gone
	// (reclaim).
	DetectionMs  []float64 `json:"detectionMs"`
	DecisionMs   []float64 `json:"decisionMs"`
	CgroupKillMs []float64 `json:"cgroupKillMs,omitempty"`
	KillMs       []float64 `json:"killMs"`
	ReclaimMs    []float64 `json:"reclaimMs"`
	// KernelOOMKills counts the node's OOM kills during the run.
	KernelOOMKills              uint64 `json:"kernelOOMKills"`
	GuaranteedKilled            bool   `json:"guaranteedKilled"`
	UnderRequestBurstableKilled bool   `json:"underRequestBurstableKilled"`
	// EvictedGroups are the pod groups in the order of their first
	// eviction; KilledGroups those with a pod evicted or OOM-killed.
	EvictedGroups      []string `json:"evictedGroups"`
	KilledGroups       []string `json:"killedGroups"`
	PeakPodsWorkingSet int64    `json:"peakPodsWorkingSet"`
	SampleHz           float64  `json:"sampleHz"`
	// AgentRunQueueMs is the agent's scheduling delay over the run: how
	// long its threads waited for a CPU, in milliseconds.
	AgentRunQueueMs float64 `json:"agentRunQueueMs"`
	Error           string  `json:"error,omitempty"`
}

// Stages are the latency stages of the report, in the order of a decision.
var Stages = []string{"detection", "decision", "cgroup kill", "kill", "reclaim"}

// Dist is a latency distribution in milliseconds.
type Dist struct {
	N   int     `json:"n"`
	P50 float64 `json:"p50"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

// Verdict is one check over all runs.
type Verdict struct {
	Check  string `json:"check"`
	Pass   bool   `json:"pass"`
	Detail string `json:"detail"`
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// Summarize turns the runs into the summary.
func Summarize(s *Scenario, runs []Run) Summary {
	sum := Summary{Scenario: s.Name, Latencies: map[string]Dist{}}
	all := map[string][]float64{}
	for _, r := range runs {
		rs := RunSummary{Run: r.Index, SampleHz: r.SampleHz, Error: r.Error, Kills: []Event{}, Evicted: []string{}, OOMKilled: []string{},
			AgentRunQueueMs: ms(r.AgentRunQueueWait)}
		for _, e := range r.Events {
			rs.Kills = append(rs.Kills, e)
			if e.Kind == "eviction" {
				rs.Evicted = append(rs.Evicted, e.Pod)
			} else {
				rs.OOMKilled = append(rs.OOMKilled, e.Pod)
			}
		}
		for _, t := range r.Evictions {
			if !t.TriggeredAt.IsZero() {
				rs.DetectionMs = append(rs.DetectionMs, ms(t.WokeAt.Sub(t.TriggeredAt)))
			}
			rs.DecisionMs = append(rs.DecisionMs, ms(t.DecidedAt.Sub(t.WokeAt)))
			if len(t.Victims) > 0 && !t.Victims[0].KilledAt.IsZero() {
				rs.CgroupKillMs = append(rs.CgroupKillMs, ms(t.Victims[0].KilledAt.Sub(t.DecidedAt)))
			}
			rs.KillMs = append(rs.KillMs, ms(t.KillSentAt.Sub(t.DecidedAt)))
			if !t.FreedAt.IsZero() {
				rs.ReclaimMs = append(rs.ReclaimMs, ms(t.FreedAt.Sub(t.KillSentAt)))
			}
		}
		all["detection"] = append(all["detection"], rs.DetectionMs...)
		all["decision"] = append(all["decision"], rs.DecisionMs...)
		all["cgroup kill"] = append(all["cgroup kill"], rs.CgroupKillMs...)
		all["kill"] = append(all["kill"], rs.KillMs...)
		all["reclaim"] = append(all["reclaim"], rs.ReclaimMs...)
		for _, smp := range r.Samples {
			rs.PeakPodsWorkingSet = max(rs.PeakPodsWorkingSet, smp.PodsWorkingSet)
			rs.KernelOOMKills = max(rs.KernelOOMKills, smp.KernelOOMKills)
		}
		group := map[string]string{}
		killedGroup := map[string]bool{}
		for _, p := range r.Pods {
			group[p.Name] = p.Group
			killed := p.Fate == "evicted" || p.Fate == "oom-killed"
			rs.GuaranteedKilled = rs.GuaranteedKilled || killed && p.QOS == "Guaranteed"
			rs.UnderRequestBurstableKilled = rs.UnderRequestBurstableKilled || killed && p.QOS == "Burstable" && p.UnderRequest
			killedGroup[p.Group] = killedGroup[p.Group] || killed
		}
		rs.EvictedGroups, rs.KilledGroups = []string{}, []string{}
		for _, e := range r.Events {
			if g := group[e.Pod]; e.Kind == "eviction" && g != "" && !slices.Contains(rs.EvictedGroups, g) {
				rs.EvictedGroups = append(rs.EvictedGroups, g)
			}
			killedGroup[group[e.Pod]] = true
		}
		delete(killedGroup, "")
		for g := range killedGroup {
			if killedGroup[g] {
				rs.KilledGroups = append(rs.KilledGroups, g)
			}
		}
		sort.Strings(rs.KilledGroups)
		sum.Runs = append(sum.Runs, rs)
	}
	for k, v := range all {
		sum.Latencies[k] = dist(v)
	}
	// A run that did not complete shows nothing either way: it counts
	// against every verdict, so an experiment that never ran cannot pass.
	verdict := func(check string, failed func(RunSummary) bool, detail func(RunSummary) string) {
		v := Verdict{Check: check, Pass: len(sum.Runs) > 0}
		var bad []string
		for _, r := range sum.Runs {
			switch {
			case r.Error != "":
				bad = append(bad, fmt.Sprintf("run %d did not complete", r.Run))
			case failed(r):
				bad = append(bad, fmt.Sprintf("run %d: %s", r.Run, detail(r)))
			}
		}
		v.Pass = v.Pass && len(bad) == 0
		v.Detail = fmt.Sprintf("%d of %d runs", len(sum.Runs)-len(bad), len(sum.Runs))
		if len(bad) > 0 {
			v.Detail += "; " + strings.Join(bad, "; ")
		}
		sum.Verdicts = append(sum.Verdicts, v)
	}
	verdict("no Guaranteed pod was killed", func(r RunSummary) bool { return r.GuaranteedKilled }, func(RunSummary) string { return "a Guaranteed pod was killed" })
	verdict("no Burstable pod under its request was killed", func(r RunSummary) bool { return r.UnderRequestBurstableKilled }, func(RunSummary) string { return "an under-request Burstable pod was killed" })
	switch s.Expect.KernelOOMKills {
	case "none", "":
		verdict("the agent acted before the kernel OOM killer (no kernel OOM kill)", func(r RunSummary) bool { return r.KernelOOMKills > 0 },
			func(r RunSummary) string { return fmt.Sprintf("%d kernel OOM kills", r.KernelOOMKills) })
	case "expected":
		verdict("the kernel OOM killer acted (the scenario expects it)", func(r RunSummary) bool { return r.KernelOOMKills == 0 },
			func(RunSummary) string { return "no kernel OOM kill" })
	}
	if want := s.Expect.Evicted; len(want) > 0 {
		verdict("evicted first, in this order: "+strings.Join(want, ", "), func(r RunSummary) bool {
			return len(r.EvictedGroups) < len(want) || !slices.Equal(r.EvictedGroups[:len(want)], want)
		}, func(r RunSummary) string { return fmt.Sprintf("evicted %v", r.EvictedGroups) })
	}
	if keep := s.Expect.Survive; len(keep) > 0 {
		verdict("never killed: "+strings.Join(keep, ", "), func(r RunSummary) bool {
			return slices.ContainsFunc(keep, func(g string) bool { return slices.Contains(r.KilledGroups, g) })
		}, func(r RunSummary) string { return fmt.Sprintf("killed %v", r.KilledGroups) })
	}
	completed := Verdict{Check: "every run completed", Pass: len(sum.Runs) > 0}
	var bad []string
	for _, r := range sum.Runs {
		if r.Error != "" {
			bad = append(bad, fmt.Sprintf("run %d: %s", r.Run, r.Error))
		}
	}
	completed.Pass = completed.Pass && len(bad) == 0
	completed.Detail = fmt.Sprintf("%d of %d runs", len(sum.Runs)-len(bad), len(sum.Runs))
	if len(bad) > 0 {
		completed.Detail += "; " + strings.Join(bad, "; ")
	}
	sum.Verdicts = append(sum.Verdicts, completed)
	return sum
}

// Failed are the verdicts that did not pass.
func (s Summary) Failed() []Verdict {
	var out []Verdict
	for _, v := range s.Verdicts {
		if !v.Pass {
			out = append(out, v)
		}
	}
	return out
}

func dist(v []float64) Dist {
	if len(v) == 0 {
		return Dist{}
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	at := func(p float64) float64 { return s[min(len(s)-1, int(p*float64(len(s))))] }
	return Dist{N: len(s), P50: at(0.5), P99: at(0.99), Max: s[len(s)-1]}
}

// Report is report.md.
func Report(s *Scenario, sum Summary) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Experiment %s\n\n", s.Name)
	if s.Description != "" {
		fmt.Fprintf(&b, "%s\n\n", strings.TrimSpace(s.Description))
	}
	fmt.Fprintf(&b, "## Settings\n\n%d run(s) of %s, sampled at %d Hz.\n\n```yaml\n", s.Repetitions, s.Duration.Duration, s.SampleHz)
	agent, _ := yaml.Marshal(s.Agent)
	b.Write(agent)
	b.WriteString("```\n\n| pod | count | qos | priority | requests | limits | workload |\n|---|---|---|---|---|---|---|\n")
	for _, p := range s.Pods {
		prio := "0"
		if p.Priority != nil {
			prio = fmt.Sprint(*p.Priority)
		}
		fmt.Fprintf(&b, "| %s | %d | %s | %s | %s | %s | %s |\n", p.Name, p.Count, p.QOSClass(), prio,
			resources(p.Requests), resources(p.Limits), workload(p))
	}
	if s.HostLoad != nil {
		fmt.Fprintf(&b, "\nOn the host, outside kubepods: %s.\n", s.HostLoad.String())
	}
	b.WriteString("\n## Runs\n\n| run | killed, in order | kernel OOM kills | peak pods working set | decision p50 (ms) | kill sent, max (ms) | agent run-queue wait (ms) | sample rate |\n|---|---|---|---|---|---|---|---|\n")
	for _, r := range sum.Runs {
		var kills []string
		for _, k := range r.Kills {
			kills = append(kills, fmt.Sprintf("%s (%s, %.2fs)", k.Pod, k.By, k.T))
		}
		text := strings.Join(kills, ", ")
		if text == "" {
			text = "none"
		}
		if r.Error != "" {
			text += " — error: " + r.Error
		}
		fmt.Fprintf(&b, "| %d | %s | %d | %s | %.2f | %.2f | %.1f | %.0f Hz |\n", r.Run, text, r.KernelOOMKills, quantityMiB(r.PeakPodsWorkingSet), dist(r.DecisionMs).P50, dist(r.KillMs).Max, r.AgentRunQueueMs, r.SampleHz)
	}
	b.WriteString("\n## Latencies across runs (ms)\n\n| stage | n | p50 | p99 | max |\n|---|---|---|---|---|\n")
	for _, k := range Stages {
		d := sum.Latencies[k]
		if k == "cgroup kill" && d.N == 0 {
			continue // the kubelet's way (--eviction-hard-memory-kill=runtime), or no hard memory threshold
		}
		fmt.Fprintf(&b, "| %s | %d | %.2f | %.2f | %.2f |\n", k, d.N, d.P50, d.P99, d.Max)
	}
	b.WriteString("\ndetection: kernel notification to the agent awake (its wake-up latency); decision: awake to decided; cgroup kill: decided to the first victim's processes killed through its cgroup; kill: decided to the kill sent (all victims); reclaim: kill sent to the victims gone. The agent's run-queue wait (above, per run) is how long its threads waited for a CPU during the run.\n\n## Verdicts\n\n")
	for _, v := range sum.Verdicts {
		mark := "PASS"
		if !v.Pass {
			mark = "FAIL"
		}
		fmt.Fprintf(&b, "- %s: %s (%s)\n", mark, v.Check, v.Detail)
	}
	b.WriteString("\n![memory over time](memory.svg)\n")
	return b.String()
}

// QOSClass is the class the pod's requests and limits make it.
func (p Pod) QOSClass() corev1.PodQOSClass { return qos.Class(p.pod(p.Name, "")) }

func resources(l corev1.ResourceList) string {
	if len(l) == 0 {
		return "-"
	}
	var parts []string
	for k, v := range l {
		parts = append(parts, fmt.Sprintf("%s=%s", k, v.String()))
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}

func workload(p Pod) string {
	switch {
	case p.Memhog != nil:
		m := p.Memhog
		rate := "max"
		if m.Rate.Value() > 0 {
			rate = m.Rate.String() + "/s"
		}
		return fmt.Sprintf("memhog %s %s at %s, after %s", m.Pattern, m.Size.String(), rate, m.StartDelay.Duration)
	case p.PageCache != nil:
		return fmt.Sprintf("page cache reader of %s", p.PageCache.Size.String())
	case p.Load != nil:
		return "load: " + p.Load.String()
	}
	return "idle"
}
