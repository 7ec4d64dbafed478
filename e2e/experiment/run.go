package experiment

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"nodeagent/cgroups"
	"nodeagent/eviction"
	"nodeagent/internal/qos"
)

// Run is one repetition: its samples and what happened in it.
type Run struct {
	Index   int       `json:"run"` // 1-based
	Start   time.Time `json:"start"`
	Samples []Sample  `json:"samples"`
	Events  []Event   `json:"events"`
	// Pods are the run's pods at their end.
	Pods []PodOutcome `json:"pods"`
	// Evictions are the agent's decisions, as /evictions traced them.
	Evictions []eviction.Trace `json:"evictions"`
	// SampleHz is the rate the sampler achieved.
	SampleHz float64 `json:"sampleHz"`
	// AgentRunQueueWait is how long the agent's threads waited for a CPU
	// while the run lasted (schedstat run_delay): its scheduling delay.
	AgentRunQueueWait time.Duration `json:"agentRunQueueWaitNs"`
	Error             string        `json:"error,omitempty"`
}

// Event is a kill on the timeline: by the agent (an eviction) or by the
// kernel (an OOM kill).
type Event struct {
	T    float64 `json:"t"`
	Kind string  `json:"kind"` // eviction or oom-kill
	By   string  `json:"by"`   // agent or kernel
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
	// Fate is survived, evicted, oom-killed or failed.
	Fate string `json:"fate"`
	// UnderRequest is true when its last working set before the end was
	// below its memory request.
	UnderRequest bool `json:"underRequest"`
}

// Progress reports a long run: which run, how far, the current pressure.
type Progress func(run, runs int, elapsed, duration time.Duration, last Sample)

// Execute runs every repetition of s and writes the results to out.
// Interrupted (ctx done), it removes the experiment's pods, stops the
// agent and keeps what was recorded so far.
func Execute(ctx context.Context, s *Scenario, env Env, out string, nodeMemory int64, progress Progress) ([]Run, error) {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return nil, err
	}
	mgr, err := cgroups.NewManager("cgroupfs")
	if err != nil {
		return nil, err
	}
	var runs []Run
	var errs []error
	for i := 1; i <= s.Repetitions && ctx.Err() == nil; i++ {
		r, err := runOnce(ctx, s, env, mgr, filepath.Join(out, fmt.Sprintf("run-%d", i)), i, nodeMemory, progress)
		if err != nil {
			r.Error = err.Error()
			errs = append(errs, fmt.Errorf("run %d: %w", i, err))
		}
		runs = append(runs, r)
	}
	if err := WriteResults(out, s, runs); err != nil {
		errs = append(errs, err)
	}
	if ctx.Err() != nil {
		errs = append(errs, fmt.Errorf("interrupted after %d of %d runs; what was recorded is in %s", len(runs), s.Repetitions, out))
	}
	return runs, errors.Join(errs...)
}

func runOnce(ctx context.Context, s *Scenario, env Env, mgr cgroups.Manager, dir string, index int, nodeMemory int64, progress Progress) (Run, error) {
	r := Run{Index: index}
	a, err := startAgent(ctx, env, filepath.Join(dir, "agent"), s.Settings(nodeMemory), "--eviction-ranking", s.Agent.EvictionRanking)
	if err != nil {
		return r, err
	}
	var nodeName string
	var node corev1.Node
	if err := a.get("/node", &node); err != nil {
		a.stop()
		return r, err
	}
	nodeName = node.Name
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
	smp := newSampler(mgr, a.cgroupRoot, r.Start)
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
	waitBefore, waitErr := runQueueWait(a.Pid())
	var mu sync.Mutex
	var wg sync.WaitGroup
	wg.Add(2)
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
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for {
			if pods, err := a.pods(); err == nil {
				smp.track(pods, nodeName)
			}
			if progress != nil {
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
	if after, err := runQueueWait(a.Pid()); err == nil && waitErr == nil {
		r.AgentRunQueueWait = after - waitBefore
	}
	if n := len(r.Samples); n > 1 {
		r.SampleHz = float64(n-1) / (r.Samples[n-1].T - r.Samples[0].T)
	}

	// What happened: the agent's evictions, the kernel's kills, the pods.
	if err := a.get("/evictions", &r.Evictions); err != nil {
		return r, err
	}
	for _, t := range r.Evictions {
		for _, v := range t.Victims {
			r.Events = append(r.Events, Event{T: Elapsed(r.Start, t.KillSentAt), Kind: "eviction", By: "agent", Pod: podGroupName(v.Pod, nodeName),
				Note: fmt.Sprintf("%s %s (woken by %s)", t.Signal, t.Threshold, orPoll(t.TriggeredBy))})
		}
	}
	pods, err := a.pods()
	if err != nil {
		return r, err
	}
	var events corev1.EventList
	a.get("/events", &events)
	r.Pods, r.Events = outcomes(pods, nodeName, groups, r.Samples, r.Events, r.Start)
	for _, e := range events.Items {
		if e.Reason == "OOMKilling" {
			r.Events = append(r.Events, Event{T: Elapsed(r.Start, e.LastTimestamp.Time), Kind: "oom-kill", By: "kernel", Pod: oomPod(e.Message, nodeName), Note: e.Message})
		}
	}
	r.Events = dedupeKernelKills(r.Events)
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
			if term.Reason == "OOMKilled" {
				o.Fate = "oom-killed"
				events = append(events, Event{T: Elapsed(start, end), Kind: "oom-kill", By: "kernel", Pod: name, Note: "container OOMKilled, exit code " + fmt.Sprint(term.ExitCode)})
			} else {
				o.Fate = "failed"
			}
		}
		for _, e := range events {
			if e.Pod == name && e.Kind == "eviction" && (end.IsZero() || e.T < Elapsed(start, end)) {
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

func abs(f float64) float64 {
	if f < 0 {
		return -f
	}
	return f
}

// WriteResults writes timeline.json, summary.json, report.md and
// memory.svg into out.
func WriteResults(out string, s *Scenario, runs []Run) error {
	summary := Summarize(s, runs)
	files := map[string]func() ([]byte, error){
		"timeline.json": func() ([]byte, error) {
			return json.MarshalIndent(map[string]any{"scenario": s, "runs": runs}, "", " ")
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
