package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestRunSelectsRunsInParallelAndCleansUp(t *testing.T) {
	var running, peak, cleaned atomic.Int32
	work := func(fail bool) func(*T) error {
		return func(t *T) error {
			t.Defer(func(context.Context) error { cleaned.Add(1); return nil })
			n := running.Add(1)
			for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
			}
			time.Sleep(50 * time.Millisecond)
			running.Add(-1)
			if fail {
				return errors.New("boom")
			}
			return nil
		}
	}
	cases := []Case{{Name: "a [NodeConformance]", Run: work(false)}, {Name: "b [NodeConformance]", Run: work(true)}, {Name: "c [Slow]", Run: work(false)},
		{Name: "d [NodeConformance]", Run: work(false)}, {Name: "e [NodeConformance]", Run: func(*T) error { panic("oops") }}}
	var progress []string
	results := Run(context.Background(), &Node{}, cases, Options{
		Focus: regexp.MustCompile(`NodeConformance`), Skip: regexp.MustCompile(`^d `), Parallel: 2,
		Progress: func(done, total int, r *Result, _ []string) {
			if r != nil {
				progress = append(progress, r.Name)
			}
		},
	})
	want := map[string]Status{"a [NodeConformance]": Passed, "b [NodeConformance]": Failed, "c [Slow]": Skipped, "d [NodeConformance]": Skipped, "e [NodeConformance]": Failed}
	for _, r := range results {
		if r.Status != want[r.Name] {
			t.Errorf("%s: %s (%s), want %s", r.Name, r.Status, r.Reason, want[r.Name])
		}
	}
	if results[1].Reason != "boom" || !strings.Contains(results[4].Reason, "panic: oops") {
		t.Errorf("reasons %q %q", results[1].Reason, results[4].Reason)
	}
	if peak.Load() != 2 {
		t.Errorf("peak parallelism %d, want 2", peak.Load())
	}
	if cleaned.Load() != 2 || len(progress) != 3 {
		t.Errorf("cleanups %d (want 2: a and b), progress %v", cleaned.Load(), progress)
	}
}

func TestInterruptedRunCleansUpAndSkipsTheRest(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var cleaned atomic.Bool
	cases := []Case{
		{Name: "long", Run: func(t *T) error {
			t.Defer(func(ctx context.Context) error {
				if ctx.Err() != nil {
					return errors.New("cleanup got a dead context")
				}
				cleaned.Store(true)
				return nil
			})
			cancel()
			<-t.Context().Done()
			return t.Context().Err()
		}},
		{Name: "never", Run: func(*T) error { return errors.New("ran after the interrupt") }},
	}
	results := Run(ctx, &Node{}, cases, Options{Parallel: 1})
	if !cleaned.Load() {
		t.Error("the interrupted case was not cleaned up")
	}
	for _, r := range results {
		if r.Status != Skipped || r.Reason != "interrupted" {
			t.Errorf("%s: %s %q, want skipped: interrupted", r.Name, r.Status, r.Reason)
		}
	}
}

func TestReportsHaveTheJUnitAndJSONShape(t *testing.T) {
	results := []Result{{Name: "ok", Status: Passed, Duration: time.Second}, {Name: "bad <x>", Status: Failed, Reason: "want 1 & got 2"}, {Name: "skip", Status: Skipped, Reason: "not focused"}}
	var buf bytes.Buffer
	if err := WriteJUnit(&buf, results, time.Now()); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		XMLName xml.Name `xml:"testsuites"`
		Tests   int      `xml:"tests,attr"`
		Suites  []struct {
			Name     string `xml:"name,attr"`
			Tests    int    `xml:"tests,attr"`
			Failures int    `xml:"failures,attr"`
			Skipped  int    `xml:"skipped,attr"`
			Cases    []struct {
				Name    string `xml:"name,attr"`
				Time    string `xml:"time,attr"`
				Failure *struct {
					Message string `xml:"message,attr"`
				} `xml:"failure"`
				Skipped *struct{} `xml:"skipped"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatalf("JUnit does not parse: %v\n%s", err, buf.String())
	}
	if doc.Tests != 3 || len(doc.Suites) != 1 || doc.Suites[0].Failures != 1 || doc.Suites[0].Skipped != 1 || len(doc.Suites[0].Cases) != 3 {
		t.Fatalf("JUnit counts: %+v", doc)
	}
	c := doc.Suites[0].Cases
	if c[0].Time != "1.000" || c[0].Failure != nil || c[1].Name != "bad <x>" || c[1].Failure == nil || c[1].Failure.Message != "want 1 & got 2" || c[2].Skipped == nil {
		t.Errorf("JUnit cases: %+v", c)
	}
	buf.Reset()
	if err := WriteJSON(&buf, results); err != nil {
		t.Fatal(err)
	}
	var js struct {
		Passed, Failed, Skipped int
		Results                 []Result
	}
	if err := json.Unmarshal(buf.Bytes(), &js); err != nil || js.Passed != 1 || js.Failed != 1 || js.Skipped != 1 || len(js.Results) != 3 {
		t.Errorf("JSON %+v %v", js, err)
	}
}

func TestCaseNamesAreUniqueAndTagged(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range Cases() {
		tagged := strings.Contains(c.Name, "[NodeConformance]") || strings.Contains(c.Name, "[NodeFeature:Eviction]") && c.Serial
		if seen[c.Name] || !tagged || !strings.HasPrefix(c.Name, "[sig-node] ") {
			t.Errorf("case name %q: duplicate or untagged", c.Name)
		}
		seen[c.Name] = true
	}
}

func TestSerialCasesRunAloneAfterTheOthers(t *testing.T) {
	var running atomic.Int32
	var order []string
	var mu sync.Mutex
	step := func(name string, serial bool) Case {
		return Case{Name: name, Serial: serial, Run: func(*T) error {
			n := running.Add(1)
			defer running.Add(-1)
			mu.Lock()
			order = append(order, name)
			mu.Unlock()
			time.Sleep(30 * time.Millisecond)
			if serial && n != 1 {
				return errors.New("a serial case ran beside another")
			}
			return nil
		}}
	}
	results := Run(context.Background(), &Node{}, []Case{step("s1", true), step("p1", false), step("p2", false), step("s2", true)}, Options{Parallel: 4})
	for _, r := range results {
		if r.Status != Passed {
			t.Errorf("%s: %s %s", r.Name, r.Status, r.Reason)
		}
	}
	if len(order) != 4 || order[2] != "s1" || order[3] != "s2" {
		t.Errorf("order %v, want the parallel cases first, then s1 and s2", order)
	}
}
