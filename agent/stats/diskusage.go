package stats

import (
	"context"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"nodeagent/agent/volumes"
	"nodeagent/internal/fsinfo"
	"nodeagent/internal/layout"
)

// DiskUsage measures what the pods' logs and disk emptyDir volumes take,
// in the background: every period (the kubelet's volumeStatsAggPeriod),
// one directory walk at a time, and at once for a directory a reader
// asked about and that was never measured. Readers get the last measure:
// a request to /stats/summary, which anyone on the node may send, never
// walks a pod's files. Safe for concurrent use.
type DiskUsage struct {
	// Dirs lists the directories to measure now.
	Dirs   func() []string
	Period time.Duration
	Clock  clock.WithTicker
	Log    *slog.Logger
	// Measure is fsinfo.DirUsage unless a test sets it.
	Measure func(dir string) (bytes, inodes int64, err error)

	mu       sync.Mutex
	measured map[string]Usage
	asked    map[string]bool // read before their first measure
	// failed could not be measured (a tree deeper than the walk goes):
	// tried again each period, never at a reader's request.
	failed map[string]bool
	kick   chan struct{}
	once   sync.Once
}

// Usage is a directory's measure.
type Usage struct {
	Bytes, Inodes int64
	Time          time.Time
}

func (d *DiskUsage) init() {
	d.once.Do(func() {
		d.kick = make(chan struct{}, 1)
		if d.Measure == nil {
			d.Measure = fsinfo.DirUsage
		}
	})
}

// Get is dir's last measure; false when it was never measured (the
// background loop measures it next).
func (d *DiskUsage) Get(dir string) (Usage, bool) {
	d.init()
	d.mu.Lock()
	u, ok := d.measured[dir]
	kick := !ok && !d.failed[dir]
	if kick {
		if d.asked == nil {
			d.asked = map[string]bool{}
		}
		d.asked[dir] = true
	}
	d.mu.Unlock()
	if kick {
		select {
		case d.kick <- struct{}{}:
		default:
		}
	}
	return u, ok
}

// Run measures until ctx ends.
func (d *DiskUsage) Run(ctx context.Context) {
	d.init()
	tick := d.Clock.NewTicker(d.Period)
	defer tick.Stop()
	d.measureAll(ctx)
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C():
			d.measureAll(ctx)
		case <-d.kick:
			d.measureNew(ctx)
		}
	}
}

// measureAll measures every directory Dirs lists, one after another, and
// forgets those it no longer lists.
func (d *DiskUsage) measureAll(ctx context.Context) {
	dirs := d.Dirs()
	keep := make(map[string]bool, len(dirs))
	for _, dir := range dirs {
		keep[dir] = true
	}
	d.mu.Lock()
	for dir := range d.measured {
		if !keep[dir] {
			delete(d.measured, dir)
		}
	}
	d.asked, d.failed = nil, nil
	d.mu.Unlock()
	for _, dir := range dirs {
		if ctx.Err() != nil {
			return
		}
		d.measure(dir)
	}
}

// measureNew measures the listed directories a reader asked about and
// that have no measure yet.
func (d *DiskUsage) measureNew(ctx context.Context) {
	for _, dir := range d.Dirs() {
		d.mu.Lock()
		_, done := d.measured[dir]
		asked := d.asked[dir]
		delete(d.asked, dir)
		d.mu.Unlock()
		if done || !asked || ctx.Err() != nil {
			continue
		}
		d.measure(dir)
	}
}

func (d *DiskUsage) measure(dir string) {
	b, i, err := d.Measure(dir)
	d.mu.Lock()
	defer d.mu.Unlock()
	if err != nil {
		d.Log.Debug("disk usage not measured", "dir", dir, "err", err)
		delete(d.measured, dir)
		if d.failed == nil {
			d.failed = map[string]bool{}
		}
		d.failed[dir] = true
		return
	}
	if d.measured == nil {
		d.measured = map[string]Usage{}
	}
	d.measured[dir] = Usage{Bytes: b, Inodes: i, Time: d.Clock.Now()}
}

// PodDirs are the directories the Summary reports for pods: each
// container's log directory and each volume's usage directory (a disk
// emptyDir's).
func PodDirs(pods []corev1.Pod, rootDir, logsDir string) []string {
	var dirs []string
	for i := range pods {
		pod := &pods[i]
		for _, c := range pod.Spec.Containers {
			dirs = append(dirs, logDir(logsDir, pod, c.Name))
		}
		for _, c := range pod.Spec.InitContainers {
			dirs = append(dirs, logDir(logsDir, pod, c.Name))
		}
		dirs = append(dirs, volumes.UsageDirs(rootDir, pod)...)
	}
	return dirs
}

func logDir(logsDir string, pod *corev1.Pod, container string) string {
	return layout.Logs(logsDir).Container(pod.Namespace, pod.Name, pod.UID, container)
}
