package experiment

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
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

// Compare prints two results side by side.
func Compare(w io.Writer, nameA, nameB string, a, b *Summary) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintf(tw, "\t%s\t%s\n", nameA, nameB)
	fmt.Fprintf(tw, "scenario\t%s\t%s\n", a.Scenario, b.Scenario)
	fmt.Fprintf(tw, "runs\t%d\t%d\n", len(a.Runs), len(b.Runs))
	count := func(s *Summary, f func(RunSummary) int) string {
		var parts []string
		for _, r := range s.Runs {
			parts = append(parts, fmt.Sprint(f(r)))
		}
		return strings.Join(parts, " ")
	}
	fmt.Fprintf(tw, "evictions per run\t%s\t%s\n", count(a, func(r RunSummary) int { return len(r.Evicted) }), count(b, func(r RunSummary) int { return len(r.Evicted) }))
	fmt.Fprintf(tw, "kernel OOM kills per run\t%s\t%s\n", count(a, func(r RunSummary) int { return int(r.KernelOOMKills) }), count(b, func(r RunSummary) int { return int(r.KernelOOMKills) }))
	first := func(s *Summary) string {
		var parts []string
		for _, r := range s.Runs {
			if len(r.Kills) == 0 {
				parts = append(parts, "-")
				continue
			}
			parts = append(parts, r.Kills[0].Pod+"("+r.Kills[0].By+")")
		}
		return strings.Join(parts, " ")
	}
	fmt.Fprintf(tw, "first killed per run\t%s\t%s\n", first(a), first(b))
	for _, k := range Stages {
		da, db := a.Latencies[k], b.Latencies[k]
		fmt.Fprintf(tw, "%s p50 / p99 (ms)\t%.2f / %.2f\t%.2f / %.2f\n", k, da.P50, da.P99, db.P50, db.P99)
	}
	verdicts := map[string][2]string{}
	var order []string
	for i, s := range []*Summary{a, b} {
		for _, v := range s.Verdicts {
			cell := verdicts[v.Check]
			if _, seen := verdicts[v.Check]; !seen {
				order = append(order, v.Check)
			}
			cell[i] = map[bool]string{true: "PASS", false: "FAIL"}[v.Pass] + " (" + strings.SplitN(v.Detail, ";", 2)[0] + ")"
			verdicts[v.Check] = cell
		}
	}
	for _, check := range order {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", check, verdicts[check][0], verdicts[check][1])
	}
	return tw.Flush()
}
