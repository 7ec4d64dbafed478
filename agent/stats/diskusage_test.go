package stats

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

// fakeWalks counts walks per directory and how many ran at once.
type fakeWalks struct {
	mu      sync.Mutex
	walks   map[string]int
	running atomic.Int32
	most    atomic.Int32
}

func (f *fakeWalks) measure(dir string) (int64, int64, error) {
	if strings.HasSuffix(dir, "/deep") {
		f.mu.Lock()
		f.walks[dir]++
		f.mu.Unlock()
		return 0, 0, errors.New("deeper than 1024 directories")
	}
	if n := f.running.Add(1); n > f.most.Load() {
		f.most.Store(n)
	}
	defer f.running.Add(-1)
	time.Sleep(time.Millisecond)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.walks[dir]++
	return int64(100 * f.walks[dir]), 1, nil
}

func (f *fakeWalks) count(dir string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.walks[dir]
}

// Readers never walk: however many ask, each directory is walked once per
// period, one walk at a time; a directory never measured is measured at
// once after it is asked for; a pod that went is forgotten; Run ends with
// its context. Time is synctest's: an absence is checked once every
// goroutine is blocked.
func TestDiskUsageWalksInTheBackgroundOnly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		walks := &fakeWalks{walks: map[string]int{}}
		clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
		var mu sync.Mutex
		dirs := []string{"/logs/a", "/logs/b"}
		d := &DiskUsage{Dirs: func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), dirs...) },
			Period: time.Minute, Clock: clk, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Measure: walks.measure}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { d.Run(ctx); close(done) }()
		eventually := func(what string, ok func() bool) {
			t.Helper()
			for end := time.Now().Add(5 * time.Second); !ok(); time.Sleep(time.Millisecond) {
				if time.Now().After(end) {
					t.Fatalf("timed out: %s", what)
				}
			}
		}
		eventually("the first pass", func() bool { _, ok := d.Get("/logs/b"); return ok })

		var readers sync.WaitGroup
		for range 256 {
			readers.Go(func() {
				for _, dir := range []string{"/logs/a", "/logs/b"} {
					if u, ok := d.Get(dir); !ok || u.Bytes != 100 {
						t.Errorf("%s: %+v %v, want the first measure", dir, u, ok)
					}
				}
			})
		}
		readers.Wait()
		if walks.count("/logs/a") != 1 || walks.count("/logs/b") != 1 {
			t.Errorf("walks %v after 512 reads: want one each", walks.walks)
		}

		mu.Lock()
		dirs = []string{"/logs/b", "/logs/new"}
		mu.Unlock()
		if _, ok := d.Get("/logs/new"); ok {
			t.Error("a directory never walked has a measure")
		}
		eventually("the new directory's walk", func() bool { _, ok := d.Get("/logs/new"); return ok })
		if walks.count("/logs/b") != 1 {
			t.Error("a kick walked more than the new directory")
		}
		for clk.Step(0); !clk.HasWaiters(); {
			time.Sleep(time.Millisecond)
		}
		clk.Step(time.Minute)
		eventually("the next period's pass", func() bool { u, _ := d.Get("/logs/b"); return u.Bytes == 200 })
		if u, ok := d.Get("/logs/a"); ok {
			t.Errorf("a gone pod's directory is still reported: %+v", u)
		}
		if walks.most.Load() != 1 {
			t.Errorf("%d walks ran at once, want 1", walks.most.Load())
		}

		// A tree the walk cannot measure is tried again each period, never at
		// a reader's request.
		mu.Lock()
		dirs = []string{"/logs/deep"}
		mu.Unlock()
		d.Get("/logs/deep")
		eventually("the deep tree's first walk", func() bool { return walks.count("/logs/deep") == 1 })
		synctest.Wait()
		for range 100 {
			if _, ok := d.Get("/logs/deep"); ok {
				t.Fatal("an unmeasured tree has a measure")
			}
		}
		synctest.Wait() // the kicks the reads sent are handled
		if n := walks.count("/logs/deep"); n != 1 {
			t.Errorf("the tree that cannot be measured was walked %d times on 100 reads, want once", n)
		}
		cancel()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("Run did not end with its context")
		}
	})
}

func TestPodDirsAreTheLogsAndDiskEmptyDirs(t *testing.T) {
	pod := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u"}, Spec: corev1.PodSpec{
		InitContainers: []corev1.Container{{Name: "i"}}, Containers: []corev1.Container{{Name: "c"}},
		Volumes: []corev1.Volume{
			{Name: "disk", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			{Name: "mem", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}},
			{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{}}},
		}}}
	got := PodDirs([]corev1.Pod{pod}, "/root", "/logs")
	want := []string{"/logs/ns_p_u/c", "/logs/ns_p_u/i", "/root/pods/u/volumes/kubernetes.io~empty-dir/disk"}
	if len(got) != len(want) {
		t.Fatalf("dirs %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("dirs %v, want %v", got, want)
		}
	}
}
