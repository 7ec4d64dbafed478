package main

import (
	"strings"
	"testing"
	"time"

	"github.com/onsi/ginkgo/v2/types"
)

func by(at time.Time, msg string) types.SpecEvent {
	return types.SpecEvent{SpecEventType: types.SpecEventByStart, Message: msg, TimelineLocation: types.TimelineLocation{Time: at}}
}

func TestEvictionTimingsFromTheSuitesSteps(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	s := types.SpecReport{LeafNodeText: "should evict", State: types.SpecStatePassed, SpecEvents: types.SpecEvents{
		by(t0.Add(-time.Minute), "setting up pods to be used by tests"),
		by(t0, "Waiting for node to have NodeCondition: MemoryPressure"),
		by(t0.Add(4200*time.Millisecond), "Waiting for evictions to occur"),
		{SpecEventType: types.SpecEventByEnd, Message: "checking for the expected pod conditions for evicted pods", TimelineLocation: types.TimelineLocation{Time: t0.Add(time.Hour)}},
		by(t0.Add(8500*time.Millisecond), "checking for the expected pod conditions for evicted pods"),
	}}
	got, ok := evictionTimings(s)
	if !ok {
		t.Fatal("an eviction spec not recognised")
	}
	if got.condition != "MemoryPressure" || got.conditionAfter != 4200*time.Millisecond || got.evictedAfter != 8500*time.Millisecond {
		t.Errorf("got %+v, want MemoryPressure seen after 4.2 s, evictions after 8.5 s", got)
	}
	table := evictionTable([]evictionTiming{got})
	if !strings.Contains(table, "| should evict | MemoryPressure | 4.2 s | 8.5 s | passed |") {
		t.Errorf("table lacks the spec's row:\n%s", table)
	}
}

func TestEvictionTimingsOfASpecThatNeverSawItsEvictions(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	s := types.SpecReport{LeafNodeText: "should evict", State: types.SpecStateFailed, SpecEvents: types.SpecEvents{
		by(t0, "Waiting for node to have NodeCondition: DiskPressure"),
		by(t0.Add(3*time.Second), "Waiting for evictions to occur"),
	}}
	got, ok := evictionTimings(s)
	if !ok || got.evictedAfter != 0 || got.conditionAfter != 3*time.Second {
		t.Fatalf("got %+v, %v", got, ok)
	}
	if row := evictionTable([]evictionTiming{got}); !strings.Contains(row, "| 3.0 s | never | failed |") {
		t.Errorf("a spec without evictions: %s", row)
	}
	if _, ok := evictionTimings(types.SpecReport{LeafNodeText: "other", SpecEvents: types.SpecEvents{by(t0, "creating a pod")}}); ok {
		t.Error("a spec without the pressure step counted as an eviction spec")
	}
	noCondition := evictionTiming{name: "limits", condition: "NoPressure", conditionAfter: 200 * time.Millisecond, evictedAfter: 40 * time.Second, state: "passed"}
	if row := evictionTable([]evictionTiming{noCondition}); !strings.Contains(row, "| limits | NoPressure | none expected | 40.0 s | passed |") {
		t.Errorf("a spec expecting no condition: %s", row)
	}
	if evictionTable(nil) != "" {
		t.Error("a table for no eviction spec")
	}
}
