package images

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	dto "github.com/prometheus/client_model/go"

	"nodeagent/cri/critest"
)

func img(id, tag string, size uint64) *runtimeapi.Image {
	return &runtimeapi.Image{Id: id, RepoTags: []string{tag}, Size: size}
}

func TestGCRemovesLeastRecentlyUsedUnusedImages(t *testing.T) {
	rt := critest.New()
	for _, i := range []*runtimeapi.Image{
		img("sha256:pause", "registry/pause:1", 100),
		img("sha256:used", "registry/app:1", 100),
		img("sha256:old", "registry/old:1", 300),
		img("sha256:older", "registry/older:1", 300),
		img("sha256:new", "registry/new:1", 300),
	} {
		rt.PutImage(i)
	}
	rt.PutContainer(&runtimeapi.ContainerStatus{Id: "app", ImageRef: "sha256:used"})
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	g := NewGC(rt, Policy{HighThresholdPercent: 85, LowThresholdPercent: 80, MinAge: 2 * time.Minute}, "registry/pause:1", clk, slog.New(slog.NewTextHandler(io.Discard, nil)))
	used, avail := uint64(500), uint64(500) // 50% full of a 1000-byte disk
	g.statfs = func(string) (uint64, uint64, error) { return used + avail, avail, nil }

	// "older" was in use once, then left; "old" never was.
	rt.PutContainer(&runtimeapi.ContainerStatus{Id: "was", ImageRef: "sha256:older"})
	if removed, err := g.Once(context.Background()); err != nil || len(removed) != 0 {
		t.Fatalf("below the threshold nothing goes: %v %v", removed, err)
	}
	rt.DeleteContainer("was")
	clk.Step(3 * time.Minute)
	rt.PutImage(img("sha256:fresh", "registry/fresh:1", 300)) // first seen now: too new

	used, avail = 900, 100 // 90% full: free down to 80%, i.e. 100 bytes
	removed, err := g.Once(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) != 1 || removed[0] != "registry/old:1" {
		t.Errorf("removed %v, want the never-used old image first", removed)
	}
	used, avail = 990, 10 // 99%: free 190 bytes: one more image, never used before once used
	if removed, _ = g.Once(context.Background()); len(removed) != 1 || removed[0] != "registry/new:1" {
		t.Errorf("removed %v, want the never-used image before the once-used one", removed)
	}
	if removed, _ = g.Once(context.Background()); len(removed) != 1 || removed[0] != "registry/older:1" {
		t.Errorf("removed %v, want the once-used image next", removed)
	}
	// Nothing evictable is left: the rest is in use, pinned or too new.
	if removed, err = g.Once(context.Background()); len(removed) != 0 || err == nil {
		t.Errorf("removed %v, err %v: want nothing and an error saying why", removed, err)
	}
	for _, c := range rt.Calls("RemoveImage") {
		id := c.ID
		if id == "sha256:pause" || id == "sha256:used" || id == "sha256:fresh" {
			t.Errorf("removed %s: the sandbox image, an image in use and a new image must stay", id)
		}
	}
}

// imageMaximumGCAge: an image unused for longer goes whatever the disk's
// usage and the minimum age, but not before the agent has watched that
// long (it has not seen the images used before it started).
func TestGCRemovesImagesUnusedLongerThanMaxAge(t *testing.T) {
	rt := critest.New()
	for _, i := range []*runtimeapi.Image{img("sha256:pause", "registry/pause:1", 100), img("sha256:used", "registry/app:1", 100),
		img("sha256:left", "registry/left:1", 100), img("sha256:idle", "registry/idle:1", 100)} {
		rt.PutImage(i)
	}
	rt.PutContainer(&runtimeapi.ContainerStatus{Id: "app", ImageRef: "sha256:used"})
	rt.PutContainer(&runtimeapi.ContainerStatus{Id: "was", ImageRef: "sha256:left"})
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	g := NewGC(rt, Policy{HighThresholdPercent: 85, LowThresholdPercent: 80, MinAge: time.Hour, MaxAge: time.Minute}, "registry/pause:1", clk, slog.New(slog.NewTextHandler(io.Discard, nil)))
	g.statfs = func(string) (uint64, uint64, error) { return 1000, 900, nil } // 10% full

	clk.Step(50 * time.Second)
	if removed, err := g.Once(context.Background()); err != nil || len(removed) != 0 {
		t.Fatalf("within MaxAge of the start: removed %v (%v)", removed, err)
	}
	rt.DeleteContainer("was")
	clk.Step(20 * time.Second) // 70 s after the start: "idle" was never seen used, "left" 20 s ago
	if removed, err := g.Once(context.Background()); err != nil || len(removed) != 1 || removed[0] != "registry/idle:1" {
		t.Errorf("removed %v (%v), want only the image never used", removed, err)
	}
	clk.Step(time.Minute)
	if removed, err := g.Once(context.Background()); err != nil || len(removed) != 1 || removed[0] != "registry/left:1" {
		t.Errorf("removed %v (%v), want the image left a minute ago", removed, err)
	}
	var m dto.Metric
	if g.collected.WithLabelValues("age").Write(&m); m.GetCounter().GetValue() != 2 {
		t.Errorf("kubelet_image_garbage_collected_total{reason=age} = %v, want 2", m.GetCounter().GetValue())
	}
}

// The images present at start age from the start, as the kubelet's
// detection at start has them: a disk-pressure reclaim MinAge later may
// remove them although no periodic pass has come yet.
func TestGCImagesAgeFromTheStart(t *testing.T) {
	rt := critest.New()
	rt.PutImage(img("sha256:pause", "registry/pause:1", 100))
	rt.PutImage(img("sha256:prepulled", "registry/prepulled:1", 100))
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	g := NewGC(rt, Policy{HighThresholdPercent: 85, LowThresholdPercent: 80, MinAge: 2 * time.Minute}, "registry/pause:1", clk, slog.New(slog.NewTextHandler(io.Discard, nil)))
	g.statfs = func(string) (uint64, uint64, error) { return 1000, 900, nil }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); g.Run(ctx, Period) }()
	defer func() { cancel(); <-done }()
	// Run's first pass has listed the images once it waits on its ticker.
	for !clk.HasWaiters() {
		time.Sleep(time.Millisecond)
	}
	clk.Step(3 * time.Minute) // past MinAge, before the first period
	removed, err := g.DeleteUnused(context.Background())
	if err != nil || len(removed) != 1 || removed[0] != "registry/prepulled:1" {
		t.Errorf("DeleteUnused 3 min after the start removed %v (%v), want the image present at start", removed, err)
	}
}
