package experiment

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"nodeagent/cgroups"
	"nodeagent/e2e/launch"
	"nodeagent/eviction"
	"nodeagent/internal/qos"
)

// Run is one repetition: its samples and what happened in it.
type Run struct {
	Index   int       `json:"run"` // 1-based
	Start   time.Time `json:"start"`
	Samples []Sample  `json:"samples"`
	Events  []Event   `json:"events"`
	// Steps are the scenario's steps as this run did them.
	Steps []StepRecord `json:"steps,omitempty"`
	// Pods are the run's pods at their end.
	Pods []PodOutcome `json:"pods"`
	// Evictions are the agent's decisions, as /evictions traced them.
	Evictions []eviction.Trace `json:"evictions"`
	// StatusSeen is when the agent's pod list first showed each pod's end
	// (phase Failed or Succeeded, or a container terminated), in seconds
	// since the start: polled at 20 Hz, for every agent alike.
	StatusSeen map[string]float64 `json:"statusSeen,omitempty"`
	// SampleHz is the rate the sampler achieved.
	SampleHz float64 `json:"sampleHz"`
	// AgentRunQueueWait is how long the agent's threads waited for a CPU
	// while the run lasted (schedstat run_delay): its scheduling delay.
	AgentRunQueueWait time.Duration `json:"agentRunQueueWaitNs"`
	Error             string        `json:"error,omitempty"`
	// Label titles the run's plot panel instead of its index (compare's).
	Label string `json:"-"`
}

// Event is a kill on the timeline: by the agent (an eviction) or by the
// kernel (an OOM kill).
type Event struct {
	T    float64 `json:"t"`
	Kind string  `json:"kind"` // eviction, kill (a userspace daemon's) or oom-kill
	By   string  `json:"by"`   // agent (nodeagent's traces), kubelet, earlyoom or kernel
	Pod  string  `json:"pod"`
	Note string  `json:"note,omitempty"`
}

// PodOutcome is how a pod ended.
type PodOutcome struct {
	Name     string `json:"name"`
	Group    string `json:"group"`
	QOS      string `json:"qos"`
	Priority int32  `json:"priority"`
	Request  int64  `json:"memoryRequest"`
	// Fate is survived, evicted, killed (by a userspace daemon),
	// oom-killed or failed.
	Fate string `json:"fate"`
	// UnderRequest is true when its last working set before the end was
	// below its memory request.
	UnderRequest bool `json:"underRequest"`
}

// Progress reports a long run: which run, how far, the current pressure.
type Progress func(run, runs int, elapsed, duration time.Duration, last Sample)

// Execute runs every repetition of s against env's agent and writes the
// results to out. A scenario that cannot apply to that agent gets a report
// saying why, and no runs. Interrupted (ctx done), it removes the
// experiment's pods, stops the agent and keeps what was recorded so far.
func Execute(ctx context.Context, s *Scenario, env Env, out string, nodeMemory int64, progress Progress) ([]Run, error) {
	// The agents' configurations name paths below it: absolute, as their
	// staticPodPath and root directory must be.
	out, err := filepath.Abs(out)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return nil, err
	}
	if err := Applies(s, env.Agent); err != nil {
		return nil, WriteNotApplicable(out, s, env.agentName(), err.Error())
	}
	mgr, err := cgroups.NewManager("cgroupfs")
	if err != nil {
		return nil, err
	}
	var cp *launch.ControlPlane
	if env.Agent == "kubelet" || s.NeedsAPIServer() {
		if cp, err = startControlPlane(env, filepath.Join(out, "controlplane")); err != nil {
			return nil, err
		}
		defer cp.Stop()
	}
	var runs []Run
	var errs []error
	for i := 1; i <= s.Repetitions && ctx.Err() == nil; i++ {
		r, err := runOnce(ctx, s, env, cp, mgr, filepath.Join(out, fmt.Sprintf("run-%d", i)), i, nodeMemory, progress)
		if err != nil {
			r.Error = err.Error()
			errs = append(errs, fmt.Errorf("run %d: %w", i, err))
		}
		runs = append(runs, r)
	}
	if err := WriteResults(out, s, env.agentName(), runs); err != nil {
		errs = append(errs, err)
	}
	if ctx.Err() != nil {
		errs = append(errs, fmt.Errorf("interrupted after %d of %d runs; what was recorded is in %s", len(runs), s.Repetitions, out))
	}
	return runs, errors.Join(errs...)
}

// startControlPlane runs the control plane the kubelet peer joins.
func startControlPlane(env Env, dir string) (*launch.ControlPlane, error) {
	if env.ControlplaneBin == "" {
		return nil, errors.New("the kubelet peer joins a control plane: set Env.ControlplaneBin (make controlplane builds bin/controlplane)")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	cp, err := launch.NewControlPlane(env.ControlplaneBin, dir)
	if err != nil {
		return nil, err
	}
	if err := cp.Start(2 * time.Minute); err != nil {
		return nil, err
	}
	// Pods are refused until the namespace's default ServiceAccount exists.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
		_, err := cp.Client.CoreV1().ServiceAccounts(apiNamespace).Get(context.Background(), "default", metav1.GetOptions{})
		if err == nil {
			return cp, nil
		}
		if time.Now().After(deadline) {
			cp.Stop()
			return nil, fmt.Errorf("no default ServiceAccount in %s within a minute: %w", apiNamespace, err)
		}
	}
}

func runOnce(ctx context.Context, s *Scenario, env Env, cp *launch.ControlPlane, mgr cgroups.Manager, dir string, index int, nodeMemory int64, progress Progress) (Run, error) {
	r := Run{Index: index}
	a, err := startPeer(ctx, s, env, cp, dir, nodeMemory)
	if err != nil {
		return r, err
	}
	nodeName := a.node()
	var load *HostLoad
	if s.HostLoad != nil {
		if load, err = StartHostLoad(s.HostLoad, filepath.Join(dir, "host-load")); err != nil {
			a.stop()
			return r, err
		}
	}
	defer func() {
		if load != nil {
			if err := load.Stop(); err != nil {
				r.Error = strings.TrimSpace(r.Error + "; host load cleanup: " + err.Error())
			}
		}
		// Pods first, so the agent itself lets them go; then the agent.
		if err := a.removePods(2 * time.Minute); err != nil {
			r.Error = strings.TrimSpace(r.Error + "; cleanup: " + err.Error())
		}
		a.stop()
	}()

	r.Start = time.Now()
	smp := newSampler(mgr, a.podsCgroupRoot(), r.Start)
	groups := map[string]Pod{}
	for _, p := range s.Pods {
		for k := 0; k < p.Count; k++ {
			name := p.Name
			if p.Count > 1 {
				name = fmt.Sprintf("%s-%d", p.Name, k+1)
			}
			groups[name] = p
			if err := a.apply(p.pod(name, env.Image)); err != nil {
				return r, err
			}
		}
	}
	runCtx, cancel := context.WithTimeout(ctx, s.Duration.Duration)
	defer cancel()
	waitBefore, waitErr := runQueueWait(a.pid())
	var mu sync.Mutex
	var wg sync.WaitGroup
	wg.Add(3)
	go func() {
		defer wg.Done()
		runSteps(runCtx, s, a, r.Start, groups, func(rec StepRecord) {
			mu.Lock()
			r.Steps = append(r.Steps, rec)
			mu.Unlock()
		})
	}()
	go func() {
		defer wg.Done()
		smp.run(runCtx, time.Second/time.Duration(s.SampleHz), func(x Sample) {
			mu.Lock()
			r.Samples = append(r.Samples, x)
			mu.Unlock()
		})
	}()
	go func() {
		defer wg.Done()
		// 20 Hz: when a pod's status first shows its end is measured
		// from outside, for every agent alike.
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		lastProgress := time.Time{}
		for {
			if pods, err := a.pods(); err == nil {
				smp.track(pods, nodeName)
			}
			if progress != nil && time.Since(lastProgress) >= 250*time.Millisecond {
				lastProgress = time.Now()
				mu.Lock()
				var last Sample
				if len(r.Samples) > 0 {
					last = r.Samples[len(r.Samples)-1]
				}
				mu.Unlock()
				progress(index, s.Repetitions, time.Since(r.Start), s.Duration.Duration, last)
			}
			select {
			case <-runCtx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	wg.Wait()
	if after, err := runQueueWait(a.pid()); err == nil && waitErr == nil {
		r.AgentRunQueueWait = after - waitBefore
	}
	if n := len(r.Samples); n > 1 {
		r.SampleHz = float64(n-1) / (r.Samples[n-1].T - r.Samples[0].T)
	}

	// What happened: the agent's own records, the kernel's kills, the pods.
	if err := a.collect(&r); err != nil {
		return r, err
	}
	pods, err := a.pods()
	if err != nil {
		return r, err
	}
	r.Pods, r.Events = outcomes(pods, nodeName, groups, r.Samples, r.Events, r.Start)
	r.StatusSeen = smp.statusSeen()
	// An agent without traces of its own (the kubelet) evicts as its pods'
	// statuses say, at the time the status was first seen.
	for _, o := range r.Pods {
		if o.Fate != "evicted" || slices.ContainsFunc(r.Events, func(e Event) bool { return e.Pod == o.Name && e.Kind == "eviction" }) {
			continue
		}
		r.Events = append(r.Events, Event{T: r.StatusSeen[o.Name], Kind: "eviction", By: env.agentName(), Pod: o.Name, Note: "from the pod's status"})
	}
	r.Events = timeKernelKills(dedupeKernelKills(r.Events), r.Samples)
	sort.SliceStable(r.Events, func(i, j int) bool { return r.Events[i].T < r.Events[j].T })
	return r, ctx.Err()
}

func orPoll(by string) string {
	if by == "" {
		return "poll"
	}
	return by
}

// podGroupName is a listed pod's name without the node suffix.
func podGroupName(listed, nodeName string) string {
	if _, name, ok := strings.Cut(listed, "/"); ok {
		listed = name
	}
	return strings.TrimSuffix(listed, "-"+nodeName)
}

// oomPod finds "(pod default/NAME)" in an OOMKilling message.
func oomPod(msg, nodeName string) string {
	_, rest, ok := strings.Cut(msg, "(pod ")
	if !ok {
		return ""
	}
	name, _, _ := strings.Cut(rest, ")")
	return podGroupName(name, nodeName)
}

// outcomes says how each pod ended, and adds the kernel kills the pods'
// statuses show (a container terminated OOMKilled).
func outcomes(pods []corev1.Pod, nodeName string, groups map[string]Pod, samples []Sample, events []Event, start time.Time) ([]PodOutcome, []Event) {
	var out []PodOutcome
	for i := range pods {
		p := &pods[i]
		name := podGroupName(p.Name, nodeName)
		g, ok := groups[name]
		if !ok {
			continue
		}
		o := PodOutcome{Name: name, Group: g.Name, QOS: string(qos.Class(p)), Fate: "survived"}
		if g.Priority != nil {
			o.Priority = *g.Priority
		}
		if req, ok := g.Requests[corev1.ResourceMemory]; ok {
			o.Request = req.Value()
		} else if lim, ok := g.Limits[corev1.ResourceMemory]; ok {
			o.Request = lim.Value()
		}
		var end time.Time
		switch {
		case p.Status.Reason == "Evicted":
			o.Fate = "evicted"
		case len(p.Status.ContainerStatuses) > 0 && p.Status.ContainerStatuses[0].State.Terminated != nil:
			term := p.Status.ContainerStatuses[0].State.Terminated
			end = term.FinishedAt.Time
			switch {
			case term.Reason == "OOMKilled":
				o.Fate = "oom-killed"
				events = append(events, Event{T: Elapsed(start, end), Kind: "oom-kill", By: "kernel", Pod: name, Note: "container OOMKilled, exit code " + fmt.Sprint(term.ExitCode)})
			case slices.ContainsFunc(events, func(e Event) bool { return e.Pod == name && e.Kind == "kill" }):
				o.Fate = "killed"
			default:
				o.Fate = "failed"
			}
		}
		for _, e := range events {
			if e.Pod == name && e.Kind != "oom-kill" && (end.IsZero() || e.T < Elapsed(start, end)) {
				end = start.Add(time.Duration(e.T * float64(time.Second)))
			}
		}
		// Under request: its last reading before it ended.
		for _, s := range samples {
			if !end.IsZero() && s.T > Elapsed(start, end) {
				break
			}
			if ps, ok := s.Pods[name]; ok {
				o.UnderRequest = o.Request > 0 && ps.WorkingSet < o.Request
			}
		}
		out = append(out, o)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, events
}

// dedupeKernelKills keeps one kernel kill per pod and second: the agent's
// OOMKilling event and the pod's OOMKilled status are the same kill.
func dedupeKernelKills(events []Event) []Event {
	var out []Event
	for _, e := range events {
		dup := false
		for _, o := range out {
			if e.Kind == "oom-kill" && o.Kind == "oom-kill" && e.Pod == o.Pod && e.Pod != "" && abs(e.T-o.T) < 2 {
				dup = true
			}
		}
		if !dup {
			out = append(out, e)
		}
	}
	return out
}

// timeKernelKills times each kernel kill by the sample at which the
// node's OOM kill count rose, nearest within 2 s: the pods' statuses and
// events carry whole seconds, the samples 10 ms.
func timeKernelKills(events []Event, samples []Sample) []Event {
	var rises []float64
	for i := 1; i < len(samples); i++ {
		for k := samples[i-1].KernelOOMKills; k < samples[i].KernelOOMKills; k++ {
			rises = append(rises, samples[i].T)
		}
	}
	used := make([]bool, len(rises))
	for i := range events {
		if events[i].Kind != "oom-kill" {
			continue
		}
		best := -1
		for j, t := range rises {
			if !used[j] && abs(t-events[i].T) < 2 && (best < 0 || abs(t-events[i].T) < abs(rises[best]-events[i].T)) {
				best = j
			}
		}
		if best >= 0 {
			used[best] = true
			events[i].T = rises[best]
		}
	}
	return events
}

func abs(f float64) float64 {
	if f < 0 {
		return -f
	}
	return f
}

// WriteResults writes timeline.json, summary.json, report.md and
// memory.svg into out; agent names what ran the pods.
func WriteResults(out string, s *Scenario, agent string, runs []Run) error {
	summary := Summarize(s, runs)
	summary.Agent = agent
	files := map[string]func() ([]byte, error){
		"timeline.json": func() ([]byte, error) {
			return json.MarshalIndent(map[string]any{"scenario": s, "agent": agent, "runs": runs}, "", " ")
		},
		"summary.json": func() ([]byte, error) { return json.MarshalIndent(summary, "", "  ") },
		"report.md":    func() ([]byte, error) { return []byte(Report(s, summary)), nil },
		"memory.svg":   func() ([]byte, error) { return []byte(Plot(s, runs)), nil },
	}
	for name, render := range files {
		data, err := render()
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if err := os.WriteFile(filepath.Join(out, name), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}
