package eviction

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
)

// Disk pressure that nothing can relieve is observed every second: its
// lines are logged when they change, and once a minute otherwise.
func TestPersistingPressureIsLoggedOnceAMinute(t *testing.T) {
	clock := clocktesting.NewFakeClock(time.Unix(1000, 0))
	src := &fakeSource{obs: Observations{}}
	critical := pod("critical", corev1.PodQOSBestEffort, 2000000000)
	pods := &fakePods{pods: []*corev1.Pod{critical}, disk: map[types.UID]int64{"critical": 1 << 30},
		evicted: map[types.UID]int64{}, msgs: map[types.UID]string{}}
	var buf bytes.Buffer
	ts, _ := ParseThresholds(Config{Hard: map[string]string{"nodefs.available": "10%"}})
	reclaimed := "removed 0 dead containers"
	m := NewManager(Options{Thresholds: ts, Pressure: NewPressure(time.Minute, clock), Clock: clock,
		Log:     slog.New(slog.NewTextHandler(&buf, nil)),
		Reclaim: func(context.Context, Signal) (string, bool) { return reclaimed, false }}, src, pods, pods)
	count := func(line string) int { return strings.Count(buf.String(), line) }
	step := func(n int) {
		for range n {
			src.set(NodeFsAvailable, 5<<30, 100<<30, clock.Now())
			m.Synchronize(context.Background())
			clock.Step(time.Second)
		}
	}
	step(30)
	if r, w := count("reclaimed node resources"), count("no pod can be evicted"); r != 1 || w != 1 {
		t.Fatalf("30 s of the same pressure: %d reclaim and %d no-victim lines, want 1 each\n%s", r, w, buf.String())
	}
	reclaimed = "removed 1 dead containers"
	step(1)
	if r := count("reclaimed node resources"); r != 2 {
		t.Errorf("a different reclaim: %d lines, want 2", r)
	}
	step(60)
	if r, w := count("reclaimed node resources"), count("no pod can be evicted"); r != 3 || w != 2 {
		t.Errorf("after another minute: %d reclaim and %d no-victim lines, want 3 and 2\n%s", r, w, buf.String())
	}
}
