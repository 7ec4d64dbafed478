package conformance

import (
	"context"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"
)

// Case is one conformance case.
type Case struct {
	// Name is stable and says which kubelet test it mirrors, with its tags.
	Name string
	Run  func(t *T) error
	// Serial cases run alone, after the others (they press the node's
	// memory).
	Serial bool
}

// Status is a case's outcome.
type Status string

const (
	Passed  Status = "passed"
	Failed  Status = "failed"
	Skipped Status = "skipped"
)

// Result is one case's outcome.
type Result struct {
	Name     string        `json:"name"`
	Status   Status        `json:"status"`
	Duration time.Duration `json:"duration"`
	Reason   string        `json:"reason,omitempty"`
}

// Options select and pace the cases.
type Options struct {
	Focus, Skip *regexp.Regexp // nil: all, none
	Parallel    int            // cases at once; < 1 is 1
	// Progress gets a line as each case starts and ends.
	Progress func(done, total int, r *Result, running []string)
}

// Run runs the selected cases against node. An interrupted run (ctx done)
// stops the running cases, cleans up after them and reports the rest as
// skipped.
func Run(ctx context.Context, node *Node, cases []Case, opts Options) []Result {
	results := make([]Result, len(cases))
	var todo []int
	for i, c := range cases {
		results[i] = Result{Name: c.Name, Status: Skipped}
		switch {
		case opts.Focus != nil && !opts.Focus.MatchString(c.Name):
			results[i].Reason = "not focused"
		case opts.Skip != nil && opts.Skip.MatchString(c.Name):
			results[i].Reason = "skipped by --skip"
		default:
			todo = append(todo, i)
		}
	}
	parallel := max(opts.Parallel, 1)
	var mu sync.Mutex
	running := map[string]bool{}
	done := 0
	report := func(r *Result) {
		if opts.Progress == nil {
			return
		}
		names := make([]string, 0, len(running))
		for n := range running {
			names = append(names, n)
		}
		sort.Strings(names)
		opts.Progress(done, len(todo), r, names)
	}
	// The parallel cases first, then the serial ones one at a time.
	sort.SliceStable(todo, func(a, b int) bool { return !cases[todo[a]].Serial && cases[todo[b]].Serial })
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	for _, i := range todo {
		if cases[i].Serial {
			wg.Wait() // alone: the others finish first
		}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			results[i].Reason = "interrupted"
			continue
		}
		wg.Add(1)
		run := func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			mu.Lock()
			running[cases[i].Name] = true
			report(nil)
			mu.Unlock()
			r := runOne(ctx, node, cases[i])
			mu.Lock()
			results[i] = r
			delete(running, cases[i].Name)
			done++
			report(&r)
			mu.Unlock()
		}
		if cases[i].Serial {
			run(i)
			continue
		}
		go run(i)
	}
	wg.Wait()
	return results
}

// runOne runs a case and its cleanups; the cleanups run even when the case
// panics or ctx is done.
func runOne(ctx context.Context, node *Node, c Case) (r Result) {
	t := newT(ctx, node, c.Name)
	start := time.Now()
	r = Result{Name: c.Name, Status: Passed}
	func() {
		defer func() {
			if p := recover(); p != nil {
				r.Status, r.Reason = Failed, fmt.Sprintf("panic: %v", p)
			}
		}()
		if err := c.Run(t); err != nil {
			r.Status, r.Reason = Failed, err.Error()
			if ctx.Err() != nil {
				r.Status, r.Reason = Skipped, "interrupted"
			}
		}
	}()
	if err := t.cleanup(); err != nil && r.Status == Passed {
		r.Status, r.Reason = Failed, "cleanup: "+err.Error()
	}
	r.Duration = time.Since(start)
	return r
}

// Counts tallies results by status.
func Counts(results []Result) map[Status]int {
	n := map[Status]int{}
	for _, r := range results {
		n[r.Status]++
	}
	return n
}

// WriteTable prints the summary: case, result, duration, reason.
func WriteTable(w io.Writer, results []Result) {
	fmt.Fprintf(w, "%-7s  %8s  %s\n", "RESULT", "DURATION", "CASE")
	for _, r := range results {
		if r.Status == Skipped && r.Reason == "not focused" {
			continue
		}
		fmt.Fprintf(w, "%-7s  %7.1fs  %s\n", r.Status, r.Duration.Seconds(), r.Name)
		if r.Reason != "" && r.Status != Passed {
			for _, line := range strings.Split(r.Reason, "\n") {
				fmt.Fprintf(w, "%-7s  %8s    %s\n", "", "", line)
			}
		}
	}
	n := Counts(results)
	fmt.Fprintf(w, "\n%d passed, %d failed, %d skipped\n", n[Passed], n[Failed], n[Skipped])
}
