package main

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/onsi/ginkgo/v2/types"
)

// The steps of upstream's runEvictionTest (test/e2e_node/eviction_test.go)
// that time an eviction spec: the pressure pods run, the node's condition
// is seen, the expected evictions are seen. The suite polls every 2 s.
const (
	stepPressure  = "Waiting for node to have NodeCondition: "
	stepEvictions = "Waiting for evictions to occur"
	stepEvicted   = "checking for the expected pod conditions for evicted pods"
	// noPressure is the condition of the specs that expect none.
	noPressure = "NoPressure"
)

// evictionTiming is one eviction spec as the suite saw it.
type evictionTiming struct {
	name, condition, state string
	// conditionAfter and evictedAfter are measured from the pressure
	// wait's start; 0 when the step was never reached.
	conditionAfter, evictedAfter time.Duration
}

// evictionTimings finds the eviction specs of a report.
func evictionTimings(s types.SpecReport) (evictionTiming, bool) {
	var start, seen, done time.Time
	t := evictionTiming{name: s.FullText(), state: s.State.String()}
	for _, e := range s.SpecEvents {
		if !e.SpecEventType.Is(types.SpecEventByStart) {
			continue
		}
		at := e.TimelineLocation.Time
		switch {
		case strings.HasPrefix(e.Message, stepPressure):
			start, t.condition = at, strings.TrimPrefix(e.Message, stepPressure)
		case e.Message == stepEvictions && !start.IsZero():
			seen = at
		case e.Message == stepEvicted && !start.IsZero():
			done = at
		}
	}
	if start.IsZero() {
		return t, false
	}
	if !seen.IsZero() {
		t.conditionAfter = seen.Sub(start)
	}
	if !done.IsZero() {
		t.evictedAfter = done.Sub(start)
	}
	return t, true
}

// evictionTable is the markdown table of the eviction specs' timings.
func evictionTable(ts []evictionTiming) string {
	if len(ts) == 0 {
		return ""
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i].name < ts[j].name })
	var b strings.Builder
	b.WriteString("\nPressure to eviction, as the suite saw it (from its pressure pods running; it polls every 2 s):\n\n")
	b.WriteString("| Eviction spec | Condition | Condition seen after | Evictions seen after | Result |\n|---|---|---:|---:|---|\n")
	for _, t := range ts {
		condition := seconds(t.conditionAfter)
		if t.condition == noPressure {
			condition = "none expected" // a local storage limit: the suite waits for no condition
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", t.name, t.condition, condition, seconds(t.evictedAfter), t.state)
	}
	return b.String()
}

func seconds(d time.Duration) string {
	if d == 0 {
		return "never"
	}
	return fmt.Sprintf("%.1f s", d.Seconds())
}
