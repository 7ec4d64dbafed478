// Package images garbage-collects the runtime's unused images as the
// kubelet's image manager does: images unused for longer than the maximum
// age go first (imageMaximumGCAge); then, when the image filesystem is
// fuller than the high threshold, the least recently used images that no
// container uses and that are old enough are removed until usage is back
// at the low threshold. The sandbox (pause) image and pinned images are
// never removed.
package images

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"nodeagent/cri"
	"nodeagent/internal/fsinfo"
	"nodeagent/internal/loop"
)

// Runtime is what image GC needs from the runtime.
type Runtime interface {
	ListImages(ctx context.Context) ([]*runtimeapi.Image, error)
	RemoveImage(ctx context.Context, image string) error
	ImageFsInfo(ctx context.Context) ([]*runtimeapi.FilesystemUsage, error)
	ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error)
}

// Policy holds the kubelet's image GC settings.
type Policy struct {
	HighThresholdPercent int           // imageGCHighThresholdPercent
	LowThresholdPercent  int           // imageGCLowThresholdPercent
	MinAge               time.Duration // imageMinimumGCAge
	// MaxAge is imageMaximumGCAge: an image unused that long is removed
	// whatever the usage (0: never). Not before MaxAge after the agent
	// started, which has not seen the images used before.
	MaxAge time.Duration
}

// Period is how often the kubelet checks (ImageGCPeriod).
const Period = 5 * time.Minute

// GC tracks when images were first seen and last used, and removes them.
type GC struct {
	rt      Runtime
	policy  Policy
	sandbox string // the runtime's sandbox image reference, never removed
	clock   clock.WithTicker
	log     *slog.Logger
	statfs  func(path string) (capacity, available uint64, err error)
	began   time.Time // when the records began: ages count from here
	// collected counts removals by reason (age, space), as the kubelet's
	// kubelet_image_garbage_collected_total.
	collected *prometheus.CounterVec

	mu      sync.Mutex         // one collection at a time (periodic or for eviction)
	records map[string]*record // by image ID
	// present, if set, is told the images the runtime holds at each pass
	// (pullrecords.Store.Prune forgets the others).
	present func(ids map[string]bool, listed time.Time)
}

// OnPresent sets what is told, at each pass, which images the runtime
// holds, and when it was asked.
func (g *GC) OnPresent(f func(ids map[string]bool, listed time.Time)) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.present = f
}

type record struct {
	firstSeen, lastUsed time.Time
	size                uint64
}

// NewGC returns an image collector.
func NewGC(rt Runtime, policy Policy, sandboxImage string, clk clock.WithTicker, log *slog.Logger) *GC {
	return &GC{rt: rt, policy: policy, sandbox: sandboxImage, clock: clk, log: log, records: map[string]*record{}, statfs: room, began: clk.Now(),
		collected: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kubelet_image_garbage_collected_total",
			Help: "Total number of images garbage collected by the kubelet, whether through disk usage or image age."}, []string{"reason"})}
}

// Metrics is the collector of the removals.
func (g *GC) Metrics() prometheus.Collector { return g.collected }

// room is a filesystem's capacity and available bytes.
func room(path string) (capacity, available uint64, err error) {
	u, err := fsinfo.Stat(path)
	return u.Capacity, u.Available, err
}

// SetPolicy takes a new policy (a config reload), after any collection
// under way.
func (g *GC) SetPolicy(p Policy) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.policy = p
}

// Run collects at once and then every period until ctx is done. The
// first pass also starts the images' ages, as the kubelet's detection at
// start does: an image present at start may go MinAge later, not MinAge
// after a first period.
func (g *GC) Run(ctx context.Context, period time.Duration) {
	collect := func(ctx context.Context) {
		if _, err := g.Once(ctx); err != nil && ctx.Err() == nil {
			g.log.Warn("image garbage collection", "err", err)
		}
	}
	collect(ctx)
	loop.Every(ctx, g.clock, period, collect)
}

// Once updates the image records and, above the high threshold, removes
// images. It returns the references of the removed images.
func (g *GC) Once(ctx context.Context) ([]string, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	images, inUse, now, err := g.refresh(ctx)
	if err != nil {
		return nil, err
	}
	old, err := g.freeOld(ctx, images, inUse, now)
	if err != nil {
		return old, err
	}
	images = slices.DeleteFunc(images, func(img *runtimeapi.Image) bool { return g.records[img.Id] == nil })
	fss, err := g.rt.ImageFsInfo(ctx)
	if err != nil || len(fss) == 0 {
		return nil, fmt.Errorf("image filesystem info: %v", err)
	}
	mountpoint := fss[0].GetFsId().GetMountpoint()
	capacity, available, err := g.statfs(mountpoint)
	if err != nil {
		return nil, err
	}
	if capacity == 0 {
		return nil, fmt.Errorf("image filesystem %s reports no capacity", mountpoint)
	}
	usage := int(100 - available*100/capacity)
	if usage < g.policy.HighThresholdPercent {
		return old, nil
	}
	toFree := int64(capacity*uint64(100-g.policy.LowThresholdPercent)/100) - int64(available)
	g.log.Info("image filesystem above the high threshold; removing unused images",
		"usage_percent", usage, "high_threshold", g.policy.HighThresholdPercent, "bytes_to_free", toFree)
	removed, err := g.free(ctx, images, inUse, toFree, now)
	return append(old, removed...), err
}

// freeOld removes the images unused for longer than MaxAge (the kubelet's
// freeOldImages; the minimum age does not apply), once the agent has
// watched that long.
func (g *GC) freeOld(ctx context.Context, images []*runtimeapi.Image, inUse map[string]bool, now time.Time) ([]string, error) {
	maxAge := g.policy.MaxAge
	if maxAge <= 0 || now.Sub(g.began) <= maxAge {
		return nil, nil
	}
	var removed []string
	var errs []error
	for _, img := range images {
		if r := g.records[img.Id]; g.used(img, inUse) || now.Sub(r.lastUsed) <= maxAge {
			continue
		}
		ref := imageRef(img)
		if err := g.rt.RemoveImage(ctx, img.Id); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", ref, err))
			continue
		}
		g.log.Info("removed an image unused for longer than imageMaximumGCAge", "image", ref, "max_age", maxAge)
		g.collected.WithLabelValues("age").Inc()
		removed = append(removed, ref)
		delete(g.records, img.Id)
	}
	if len(errs) > 0 {
		return removed, fmt.Errorf("wanted to free images older than %v, encountered errors in image deletion: %w", maxAge, errors.Join(errs...))
	}
	return removed, nil
}

// imageRef names an image in logs: its first tag, else its ID.
func imageRef(img *runtimeapi.Image) string {
	if len(img.RepoTags) > 0 {
		return img.RepoTags[0]
	}
	return img.Id
}

// DeleteUnused removes every unused image old enough, whatever the
// filesystem's usage: the reclaim that runs under disk pressure before any
// pod is evicted (the kubelet's DeleteUnusedImages).
func (g *GC) DeleteUnused(ctx context.Context) ([]string, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	images, inUse, now, err := g.refresh(ctx)
	if err != nil {
		return nil, err
	}
	removed, _ := g.free(ctx, images, inUse, math.MaxInt64, now) // "freed less than wanted" is expected here
	return removed, nil
}

// refresh updates the records from the runtime's images and containers.
func (g *GC) refresh(ctx context.Context) ([]*runtimeapi.Image, map[string]bool, time.Time, error) {
	listed := g.clock.Now()
	images, err := g.rt.ListImages(ctx)
	if err != nil {
		return nil, nil, time.Time{}, err
	}
	containers, err := g.rt.ListContainers(ctx, nil)
	if err != nil {
		return nil, nil, time.Time{}, err
	}
	now := g.clock.Now()
	inUse := map[string]bool{}
	for _, c := range containers {
		inUse[c.ImageRef] = true
		inUse[c.GetImage().GetImage()] = true
		// Image volumes are in use as long as a container mounts them, as
		// the kubelet's handleImageVolumes.
		if ids := c.GetAnnotations()[cri.AnnotationImageVolumes]; ids != "" {
			for _, id := range strings.Split(ids, ",") {
				inUse[id] = true
			}
		}
	}
	present := map[string]bool{}
	for _, img := range images {
		present[img.Id] = true
		r := g.records[img.Id]
		if r == nil {
			r = &record{firstSeen: now}
			g.records[img.Id] = r
		}
		r.size = img.Size
		if g.used(img, inUse) {
			r.lastUsed = now
		}
	}
	for id := range g.records {
		if !present[id] {
			delete(g.records, id)
		}
	}
	if g.present != nil {
		g.present(present, listed)
	}
	return images, inUse, now, nil
}

// used reports whether a container uses the image, or it must be kept.
func (g *GC) used(img *runtimeapi.Image, inUse map[string]bool) bool {
	if img.Pinned || inUse[img.Id] {
		return true
	}
	for _, ref := range append(append([]string{}, img.RepoTags...), img.RepoDigests...) {
		if inUse[ref] || ref == g.sandbox {
			return true
		}
	}
	return false
}

// free removes evictable images, least recently used first (then the
// oldest), until toFree bytes are gone.
func (g *GC) free(ctx context.Context, images []*runtimeapi.Image, inUse map[string]bool, toFree int64, now time.Time) ([]string, error) {
	var candidates []*runtimeapi.Image
	for _, img := range images {
		r := g.records[img.Id]
		if g.used(img, inUse) || now.Sub(r.firstSeen) < g.policy.MinAge {
			continue
		}
		candidates = append(candidates, img)
	}
	sort.Slice(candidates, func(i, j int) bool {
		a, b := g.records[candidates[i].Id], g.records[candidates[j].Id]
		if !a.lastUsed.Equal(b.lastUsed) {
			return a.lastUsed.Before(b.lastUsed)
		}
		return a.firstSeen.Before(b.firstSeen)
	})
	var removed []string
	var freed int64
	for _, img := range candidates {
		if freed >= toFree {
			break
		}
		ref := imageRef(img)
		if err := g.rt.RemoveImage(ctx, img.Id); err != nil {
			g.log.Warn("remove image", "image", ref, "err", err)
			continue
		}
		g.log.Info("removed unused image", "image", ref, "bytes", img.Size)
		g.collected.WithLabelValues("space").Inc()
		freed += int64(img.Size)
		removed = append(removed, ref)
		delete(g.records, img.Id)
	}
	if freed < toFree {
		return removed, fmt.Errorf("freed %d of the %d bytes wanted: the rest is in use or too new", freed, toFree)
	}
	return removed, nil
}
