package experiment

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
)

// ReadSummary reads a result directory's summary.json.
func ReadSummary(dir string) (*Summary, error) {
	data, err := os.ReadFile(filepath.Join(dir, "summary.json"))
	if err != nil {
		return nil, fmt.Errorf("%s is not an experiment's result directory: %w", dir, err)
	}
	var s Summary
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, "summary.json"), err)
	}
	return &s, nil
}

// timeline is timeline.json.
type timeline struct {
	Scenario *Scenario `json:"scenario"`
	Agent    string    `json:"agent"`
	Runs     []Run     `json:"runs"`
}

func readTimeline(dir string) (*timeline, error) {
	data, err := os.ReadFile(filepath.Join(dir, "timeline.json"))
	if err != nil {
		return nil, err
	}
	var tl timeline
	if err := json.Unmarshal(data, &tl); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, "timeline.json"), err)
	}
	if tl.Scenario == nil {
		return nil, fmt.Errorf("%s: no scenario", filepath.Join(dir, "timeline.json"))
	}
	return &tl, nil
}

// ReadResult is a result directory's summary, made again from its
// timeline when it has one: results written by an older nodetest are
// measured as today's are.
func ReadResult(dir string) (*Summary, error) {
	tl, err := readTimeline(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return ReadSummary(dir) // a scenario that did not apply
	}
	if err != nil {
		return nil, err
	}
	sum := Summarize(tl.Scenario, tl.Runs)
	sum.Agent = tl.Agent
	return &sum, nil
}

// Compare prints results side by side, a column each: the same scenario
// against nodeagent, the kubelet and earlyoom, or two settings of one.
func Compare(w io.Writer, names []string, sums []*Summary) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	row := func(label string, cell func(*Summary) string) {
		cells := []string{label}
		for _, s := range sums {
			if s.NotApplicable != "" && label != "agent" && label != "scenario" && label != "result" {
				cells = append(cells, "-")
				continue
			}
			cells = append(cells, cell(s))
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	fmt.Fprintln(tw, "\t"+strings.Join(names, "\t"))
	row("agent", func(s *Summary) string { return orDash(s.Agent) })
	row("scenario", func(s *Summary) string { return s.Scenario })
	row("result", func(s *Summary) string {
		if s.NotApplicable != "" {
			return "does not apply: " + s.NotApplicable
		}
		return fmt.Sprintf("%d runs", len(s.Runs))
	})
	// perRun counts the runs by a value of each: "1 ×18, 2 ×2".
	perRun := func(f func(RunSummary) string) func(*Summary) string {
		return func(s *Summary) string {
			counts := map[string]int{}
			var order []string
			for _, r := range s.Runs {
				v := f(r)
				if counts[v] == 0 {
					order = append(order, v)
				}
				counts[v]++
			}
			sort.Strings(order)
			var parts []string
			for _, v := range order {
				parts = append(parts, fmt.Sprintf("%s ×%d", v, counts[v]))
			}
			return strings.Join(parts, ", ")
		}
	}
	row("runs with a kernel OOM kill", func(s *Summary) string {
		n := 0
		for _, r := range s.Runs {
			if r.KernelOOMKills > 0 {
				n++
			}
		}
		return fmt.Sprintf("%d of %d", n, len(s.Runs))
	})
	row("runs killed before the crossing", func(s *Summary) string {
		n := 0
		for _, r := range s.Runs {
			if r.KilledBeforeCrossing {
				n++
			}
		}
		return fmt.Sprintf("%d of %d", n, len(s.Runs))
	})
	row("agent's kills per run", perRun(func(r RunSummary) string { return fmt.Sprint(len(r.Evicted)) }))
	row("kernel OOM kills per run", perRun(func(r RunSummary) string { return fmt.Sprint(r.KernelOOMKills) }))
	row("first killed per run", perRun(func(r RunSummary) string {
		if len(r.Kills) == 0 {
			return "-"
		}
		return r.Kills[0].Pod + "(" + r.Kills[0].By + ")"
	}))
	row("peak pods usage / limit, max", func(s *Summary) string {
		peak, limit := int64(0), int64(0)
		for _, r := range s.Runs {
			peak, limit = max(peak, r.PeakPodsUsage), max(limit, r.PodsLimit)
		}
		if limit == 0 {
			return "-"
		}
		return fmt.Sprintf("%.0f%%", 100*float64(peak)/float64(limit))
	})
	for _, k := range append(append([]string(nil), OutsideStages...), Stages...) {
		row(k+" p50 / p99 (ms)", func(s *Summary) string {
			d := s.Latencies[k]
			if d.N == 0 {
				return "-"
			}
			return fmt.Sprintf("%.2f / %.2f (n %d)", d.P50, d.P99, d.N)
		})
	}
	var order []string
	seen := map[string]bool{}
	for _, s := range sums {
		for _, v := range s.Verdicts {
			if !seen[v.Check] {
				seen[v.Check] = true
				order = append(order, v.Check)
			}
		}
	}
	for _, check := range order {
		row(check, func(s *Summary) string {
			for _, v := range s.Verdicts {
				if v.Check == check {
					return map[bool]string{true: "PASS", false: "FAIL"}[v.Pass] + " (" + strings.SplitN(v.Detail, ";", 2)[0] + ")"
				}
			}
			return "-"
		})
	}
	return tw.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// ComparePlot is the reports' memory plot with one panel per result: the
// first run of each, named by its agent (or directory).
func ComparePlot(names, dirs []string) (string, error) {
	var scenario *Scenario
	var runs []Run
	for i, dir := range dirs {
		tl, err := readTimeline(dir)
		if errors.Is(err, fs.ErrNotExist) {
			continue // a scenario that did not apply has no timeline
		}
		if err != nil {
			return "", err
		}
		if len(tl.Runs) == 0 {
			continue
		}
		if scenario == nil {
			scenario = tl.Scenario
		}
		r := tl.Runs[0]
		r.Label = names[i] + ", run 1"
		if tl.Agent != "" && tl.Agent != names[i] {
			r.Label = tl.Agent + " (" + names[i] + "), run 1"
		}
		runs = append(runs, r)
	}
	if scenario == nil {
		return "", fmt.Errorf("no runs to plot in %v", dirs)
	}
	return Plot(scenario, runs), nil
}
