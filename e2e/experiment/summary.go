package experiment

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
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
	Scenario string `json:"scenario"`
	// Agent is what ran the pods: nodeagent, kubelet or earlyoom.
	Agent string `json:"agent,omitempty"`
	// NotApplicable says why the scenario could not run against Agent.
	NotApplicable string          `json:"notApplicable,omitempty"`
	Runs          []RunSummary    `json:"runs"`
	Latencies     map[string]Dist `json:"latenciesMs"` // detection, decision, kill, reclaim
	Verdicts      []Verdict       `json:"verdicts"`
}

// RunSummary is one run's outcome.
type RunSummary struct {
	Run int `json:"run"`
	// Steps are the scenario's steps as the run did them.
	Steps     []StepRecord `json:"steps,omitempty"`
	Kills     []Event      `json:"kills"` // in order
	Evicted   []string     `json:"evicted"`
	OOMKilled []string     `json:"oomKilled"`
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
	// Measured from outside, alike for every agent: from the threshold's
	// crossing (the first sample with the pods' working set past their
	// memory less the hard threshold) to the first pod killed (the first
	// sample where a pod's working set halved or its cgroup went) and to
	// the first pod's end in the agent's pod list (polled at 20 Hz). Empty
	// when the run never crossed.
	CrossToKillMs   []float64 `json:"crossToKillMs,omitempty"`
	CrossToStatusMs []float64 `json:"crossToStatusMs,omitempty"`
	// KilledBeforeCrossing: a pod was killed and the samples never saw the
	// crossing (the agent acted on its own, earlier reading, or between
	// two samples).
	KilledBeforeCrossing bool `json:"killedBeforeCrossing,omitempty"`
	// PeakPodsUsage is the pods' highest memory usage, PodsLimit their
	// memory (podsMemory).
	PeakPodsUsage int64 `json:"peakPodsUsage"`
	PodsLimit     int64 `json:"podsLimit,omitempty"`
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

// OutsideStages are the latencies measured from outside, for any agent.
var OutsideStages = []string{"crossing to kill", "crossing to status"}

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
		rs := RunSummary{Run: r.Index, SampleHz: r.SampleHz, Error: r.Error, Kills: []Event{}, Evicted: []string{}, OOMKilled: []string{}, Steps: r.Steps,
			AgentRunQueueMs: ms(r.AgentRunQueueWait)}
		for _, e := range r.Events {
			rs.Kills = append(rs.Kills, e)
			if e.Kind != "oom-kill" { // the agent's action: an eviction or a daemon's kill
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
			rs.PeakPodsUsage = max(rs.PeakPodsUsage, smp.PodsUsage)
			rs.KernelOOMKills = max(rs.KernelOOMKills, smp.KernelOOMKills)
		}
		if pm := s.Agent.PodsMemory; pm != nil {
			rs.PodsLimit = pm.Value()
		}
		rs.CrossToKillMs, rs.CrossToStatusMs, rs.KilledBeforeCrossing = fromOutside(s, r, rs.PodsLimit)
		all["crossing to kill"] = append(all["crossing to kill"], rs.CrossToKillMs...)
		all["crossing to status"] = append(all["crossing to status"], rs.CrossToStatusMs...)
		group := map[string]string{}
		killedGroup := map[string]bool{}
		for _, p := range r.Pods {
			group[p.Name] = p.Group
			killed := p.Fate == "evicted" || p.Fate == "killed" || p.Fate == "oom-killed"
			rs.GuaranteedKilled = rs.GuaranteedKilled || killed && p.QOS == "Guaranteed"
			rs.UnderRequestBurstableKilled = rs.UnderRequestBurstableKilled || killed && p.QOS == "Burstable" && p.UnderRequest
			killedGroup[p.Group] = killedGroup[p.Group] || killed
		}
		rs.EvictedGroups, rs.KilledGroups = []string{}, []string{}
		for _, e := range r.Events {
			if g := group[e.Pod]; e.Kind != "oom-kill" && g != "" && !slices.Contains(rs.EvictedGroups, g) {
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

// fromOutside is a run's crossing-to-kill and crossing-to-status in
// milliseconds, from the samples and the pod list alone, and whether a pod
// was killed in a run whose samples never crossed.
func fromOutside(s *Scenario, r Run, limit int64) (toKill, toStatus []float64, killedBefore bool) {
	margin, err := hardMemoryMargin(s)
	if err != nil || limit == 0 {
		return nil, nil, false
	}
	crossed := -1.0
	for _, smp := range r.Samples {
		if limit-smp.PodsWorkingSet < margin {
			crossed = smp.T
			break
		}
	}
	kill := firstKill(r.Samples, max(crossed, 0))
	if crossed < 0 {
		return nil, nil, kill >= 0
	}
	if kill >= 0 {
		toKill = []float64{(kill - crossed) * 1000}
	}
	status := -1.0
	for _, t := range r.StatusSeen {
		if t >= crossed && (status < 0 || t < status) {
			status = t
		}
	}
	if status >= 0 {
		toStatus = []float64{(status - crossed) * 1000}
	}
	return toKill, toStatus, false
}

// firstKill is the time of the first sample from `from` on where a pod's
// working set halved or its cgroup went, or -1.
func firstKill(samples []Sample, from float64) float64 {
	const minWorkingSet = 32 << 20 // a pod this small halving is noise
	for i := 1; i < len(samples); i++ {
		prev, cur := samples[i-1], samples[i]
		if cur.T < from {
			continue
		}
		for name, ps := range prev.Pods {
			now, ok := cur.Pods[name]
			if ps.WorkingSet >= minWorkingSet && (!ok || now.WorkingSet < ps.WorkingSet/2) {
				return cur.T
			}
		}
	}
	return -1
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
	if sum.Agent != "" {
		fmt.Fprintf(&b, "Against %s.\n\n", sum.Agent)
	}
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
	b.WriteString("\n## Runs\n\n| run | killed, in order | kernel OOM kills | peak pods working set | peak pods usage / limit | crossing to kill (ms) | decision p50 (ms) | kill sent, max (ms) | agent run-queue wait (ms) | sample rate |\n|---|---|---|---|---|---|---|---|---|---|\n")
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
		peak, toKill := "-", "-"
		if r.PodsLimit > 0 {
			peak = fmt.Sprintf("%.0f%%", 100*float64(r.PeakPodsUsage)/float64(r.PodsLimit))
		}
		switch {
		case len(r.CrossToKillMs) > 0:
			toKill = fmt.Sprintf("%.0f", r.CrossToKillMs[0])
		case r.KilledBeforeCrossing:
			toKill = "before"
		}
		fmt.Fprintf(&b, "| %d | %s | %d | %s | %s | %s | %.2f | %.2f | %.1f | %.0f Hz |\n", r.Run, text, r.KernelOOMKills, quantityMiB(r.PeakPodsWorkingSet), peak, toKill,
			dist(r.DecisionMs).P50, dist(r.KillMs).Max, r.AgentRunQueueMs, r.SampleHz)
	}
	if len(s.Steps) > 0 {
		b.WriteString("\n## Steps\n\n")
		for _, st := range s.Steps {
			fmt.Fprintf(&b, "- at %s: resize %s to %s\n", st.At.Duration, st.Resize.Pods, st.Resize)
		}
		for _, r := range sum.Runs {
			fmt.Fprintf(&b, "- run %d:\n%s", r.Run, stepsText(r.Steps))
		}
	}
	b.WriteString("\n## Latencies across runs (ms)\n\n| stage | n | p50 | p99 | max |\n|---|---|---|---|---|\n")
	for _, k := range append(append([]string(nil), Stages...), OutsideStages...) {
		d := sum.Latencies[k]
		if k == "cgroup kill" && d.N == 0 {
			continue // the kubelet's way (--eviction-hard-memory-kill=runtime), or no hard memory threshold
		}
		if d.N == 0 {
			fmt.Fprintf(&b, "| %s | 0 | - | - | - |\n", k)
			continue
		}
		fmt.Fprintf(&b, "| %s | %d | %.2f | %.2f | %.2f |\n", k, d.N, d.P50, d.P99, d.Max)
	}
	b.WriteString("\ndetection: kernel notification to the agent awake (its wake-up latency); decision: awake to decided; cgroup kill: decided to the first victim's processes killed through its cgroup; kill: decided to the kill sent (all victims); reclaim: kill sent to the victims gone. The agent's run-queue wait (above, per run) is how long its threads waited for a CPU during the run. Measured from outside, for any agent: crossing to kill is from the first sample with the pods past their memory less the hard threshold to the first sample where a pod's working set halved or its cgroup went (\"before\": killed in a run whose samples never crossed); crossing to status, to the first pod's end in the agent's pod list (polled at 20 Hz). The first five stages come from nodeagent's own traces and are empty for other agents.\n\n## Verdicts\n\n")
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

// WriteNotApplicable writes the summary and report of a scenario that
// cannot run against agent, saying why.
func WriteNotApplicable(out string, s *Scenario, agent, why string) error {
	sum := Summary{Scenario: s.Name, Agent: agent, NotApplicable: why, Latencies: map[string]Dist{}}
	data, err := json.MarshalIndent(sum, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(out, "summary.json"), data, 0o644); err != nil {
		return err
	}
	report := fmt.Sprintf("# Experiment %s\n\nDoes not apply to %s: %s.\n", s.Name, agent, why)
	return os.WriteFile(filepath.Join(out, "report.md"), []byte(report), 0o644)
}
