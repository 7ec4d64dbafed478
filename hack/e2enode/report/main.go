// Command report sums up a ginkgo JSON report of the upstream node e2e
// suite: a table of passed, failed and skipped specs by group, the
// eviction specs' time from pressure to eviction, the failures with their
// first line, and a last line
//
//	upstream NodeConformance: P passed, F failed, S skipped
//
// It exits 1 when a spec failed, 2 when the report cannot be read.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strings"

	"github.com/onsi/ginkgo/v2/types"
)

type counts struct{ passed, failed, skipped int }

func (c counts) total() int { return c.passed + c.failed + c.skipped }

type failure struct{ group, name, reason string }

func main() {
	jsonPath := flag.String("json", "", "ginkgo JSON report")
	focus := flag.String("focus", `\[NodeConformance\]`, "the run's focus: specs outside it are not counted")
	skip := flag.String("skip", "", "the run's named skips: counted as skipped")
	markdown := flag.String("markdown", "", "also write the table and the failures here")
	title := flag.String("title", "upstream NodeConformance", "the last line's name of the run")
	flag.Parse()
	if err := run(*jsonPath, *focus, *skip, *markdown, *title); err != nil {
		fmt.Fprintln(os.Stderr, "report:", err)
		os.Exit(2)
	}
}

func run(jsonPath, focus, skip, markdown, title string) error {
	focusRE, err := regexp.Compile(focus)
	if err != nil {
		return fmt.Errorf("--focus: %w", err)
	}
	var skipRE *regexp.Regexp
	if skip != "" {
		if skipRE, err = regexp.Compile(skip); err != nil {
			return fmt.Errorf("--skip: %w", err)
		}
	}
	data, err := os.ReadFile(jsonPath)
	if err != nil {
		return err
	}
	var reports []types.Report
	if err := json.Unmarshal(data, &reports); err != nil {
		return fmt.Errorf("%s: %w", jsonPath, err)
	}

	groups := map[string]*counts{}
	var all counts
	var failures []failure
	var evictions []evictionTiming
	for _, r := range reports {
		for _, s := range r.SpecReports {
			if s.LeafNodeType != types.NodeTypeIt {
				continue
			}
			text := s.FullText()
			if !focusRE.MatchString(text) {
				continue
			}
			if t, ok := evictionTimings(s); ok {
				evictions = append(evictions, t)
			}
			g := group(s.ContainerHierarchyTexts)
			c := groups[g]
			if c == nil {
				c = &counts{}
				groups[g] = c
			}
			switch {
			case skipRE != nil && skipRE.MatchString(text), s.State == types.SpecStateSkipped, s.State == types.SpecStatePending:
				c.skipped++
				all.skipped++
			case s.State == types.SpecStatePassed:
				c.passed++
				all.passed++
			default:
				c.failed++
				all.failed++
				failures = append(failures, failure{g, text, firstLine(s)})
			}
		}
	}
	if all.total() == 0 {
		return fmt.Errorf("%s: no spec matches %s", jsonPath, focus)
	}

	var b strings.Builder
	names := make([]string, 0, len(groups))
	for g := range groups {
		names = append(names, g)
	}
	sort.Slice(names, func(i, j int) bool {
		if a, b := groups[names[i]].total(), groups[names[j]].total(); a != b {
			return a > b
		}
		return names[i] < names[j]
	})
	fmt.Fprintf(&b, "| Spec group | Passed | Failed | Skipped | Total |\n|---|---:|---:|---:|---:|\n")
	for _, g := range names {
		c := groups[g]
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %d |\n", g, c.passed, c.failed, c.skipped, c.total())
	}
	fmt.Fprintf(&b, "| **all** | **%d** | **%d** | **%d** | **%d** |\n", all.passed, all.failed, all.skipped, all.total())
	b.WriteString(evictionTable(evictions))
	if len(failures) > 0 {
		sort.Slice(failures, func(i, j int) bool { return failures[i].name < failures[j].name })
		fmt.Fprintf(&b, "\nFailures:\n\n")
		for _, f := range failures {
			fmt.Fprintf(&b, "- %s\n  %s\n", f.name, f.reason)
		}
	}
	last := fmt.Sprintf("%s: %d passed, %d failed, %d skipped\n", title, all.passed, all.failed, all.skipped)
	if markdown != "" {
		if err := os.WriteFile(markdown, []byte(b.String()+"\n"+last), 0o644); err != nil {
			return err
		}
	}
	_, _ = io.WriteString(os.Stdout, b.String()+"\n"+last)
	if all.failed > 0 {
		os.Exit(1)
	}
	return nil
}

// tag is a bracketed tag of a spec text: [sig-node], [NodeConformance].
var tag = regexp.MustCompile(`\[[^\]]*\]`)

// group is the first container's text without its tags.
func group(containers []string) string {
	for _, c := range containers {
		if g := strings.Join(strings.Fields(tag.ReplaceAllString(c, "")), " "); g != "" {
			return g
		}
	}
	return "(top level)"
}

// firstLine is the first line of a failure's message, where it failed.
func firstLine(s types.SpecReport) string {
	msg := strings.TrimSpace(s.Failure.Message)
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		msg = msg[:i]
	}
	if len(msg) > 300 {
		msg = msg[:300] + "..."
	}
	return fmt.Sprintf("%s: %s (%s)", s.State, msg, s.Failure.Location)
}
