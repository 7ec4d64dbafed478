//go:build integration

package eviction

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"nodeagent/cgroups"
	"nodeagent/internal/testhog"
)

// wakeups records the kernel notifications the agent would be woken by.
type wakeups struct {
	mu sync.Mutex
	by map[string]int
}

func (w *wakeups) note(_ time.Time, by string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.by[by]++
}

func (w *wakeups) count(by string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.by[by]
}

// TestKernelNotificationsLive arms, on the host's real hierarchy (v1 on
// the build hosts, v2 in the VM lane), the notifications the eviction
// manager wakes on, around a 64 MiB cgroup whose process allocates past
// the limit: a usage line at 16 MiB and an OOM notification on v1; a
// memory.high tripwire at 16 MiB and a PSI trigger on v2, whose stalls
// the tripwire's throttling causes.
func TestKernelNotificationsLive(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("needs root to create cgroups (make test runs as root)")
	}
	m, err := cgroups.NewManager("cgroupfs")
	if err != nil {
		t.Fatal(err)
	}
	name := cgroups.Name{"nodeagent-notify-test-" + strconv.Itoa(os.Getpid())}
	limit := int64(64 << 20)
	if err := m.Set(name, &cgroups.ResourceConfig{Memory: &limit}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := m.Remove(name); err != nil {
			t.Error(err)
		}
	})
	dir := m.Path(name)
	w := &wakeups{by: map[string]int{}}
	want := []string{WokenByMemcgThreshold, WokenByMemcgOOM}
	if m.Version() == 1 {
		memcg := NewMemcgThresholds(w.note)
		defer memcg.Close()
		if err := memcg.Arm("line", dir, 16<<20, 0); err != nil {
			t.Fatal(err)
		}
		if err := memcg.ArmOOM("oom", dir); err != nil {
			t.Fatal(err)
		}
	} else {
		want = []string{WokenByTripwire, WokenByPSI}
		wires, err := NewTripwires(func(at time.Time) { w.note(at, WokenByTripwire) }, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer wires.Close()
		if err := wires.Arm(dir, 16<<20); err != nil {
			t.Fatal(err)
		}
		psi, err := WatchPressure(filepath.Join(dir, "memory.pressure"), func(at time.Time) { w.note(at, WokenByPSI) })
		if err != nil {
			t.Fatal(err)
		}
		defer psi.Close()
		t.Logf("PSI trigger %q", psi.Trigger)
	}

	hog := testhog.Start(t, filepath.Join(dir, "cgroup.procs"))
	hog.Go()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if w.count(want[0]) > 0 && w.count(want[1]) > 0 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, by := range want {
		if w.count(by) == 0 {
			t.Errorf("no %s notification within 60s of the hog starting (got %v)", by, w.by)
		}
	}
	t.Logf("cgroup v%d notifications: %v", m.Version(), w.by)
}

// TestNodePressureTriggerLive arms the node-wide PSI trigger the agent
// arms on every host with PSI: the kernel must accept it (with the 2 s
// window where the agent lacks CAP_SYS_RESOURCE) and Close must end its
// poll.
func TestNodePressureTriggerLive(t *testing.T) {
	if _, err := os.Stat("/proc/pressure/memory"); err != nil {
		t.Fatalf("this host has no PSI (%v); the agent would only poll memory.available", err)
	}
	psi, err := WatchPressure("/proc/pressure/memory", func(time.Time) {})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("node trigger %q", psi.Trigger)
	closed := make(chan struct{})
	go func() { psi.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not end the PSI poll")
	}
}

// A line registered after usage already climbed past it gets no crossing
// from the kernel: Arm reports it, when the reading it came from was below.
func TestMemcgLinePassedWhileArmingIsReportedLive(t *testing.T) {
	m, err := cgroups.NewManager("cgroupfs")
	if err != nil {
		t.Fatal(err)
	}
	if m.Version() != 1 {
		t.Skip("memcg usage thresholds are cgroup v1's; v2 arms memory.high tripwires")
	}
	name := cgroups.Name{"nodeagent-arm-test-" + strconv.Itoa(os.Getpid())}
	limit := int64(64 << 20)
	if err := m.Set(name, &cgroups.ResourceConfig{Memory: &limit}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Remove(name) })
	dir := m.Path(name)
	// 8 MiB of page cache charged to the cgroup, by a shell that joins it
	// first and then stays.
	file := filepath.Join(t.TempDir(), "cache")
	sh := exec.Command("sh", "-c", `echo $$ > "$1/cgroup.procs" && head -c 8388608 /dev/zero > "$2" && echo ready && exec sleep 60`, "sh", dir, file)
	out, _ := sh.StdoutPipe()
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sh.Process.Kill(); sh.Wait() })
	if _, err := bufio.NewReader(out).ReadString('\n'); err != nil {
		t.Fatalf("the page-cache writer did not get ready: %v", err)
	}
	read, err := cgroups.ReadUint(filepath.Join(dir, "memory.usage_in_bytes"))
	usage := int64(read)
	if err != nil || usage < 4<<20 {
		t.Fatalf("usage %d (%v): want the writer's 8 MiB of page cache", usage, err)
	}
	w := &wakeups{by: map[string]int{}}
	memcg := NewMemcgThresholds(w.note)
	defer memcg.Close()
	// Read above the line: the caller has seen it, no extra wake-up.
	if err := memcg.Arm("seen", dir, usage/2, usage); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	if n := w.count(WokenByMemcgThreshold); n != 0 {
		t.Fatalf("%d wake-ups for a line the reading was already past", n)
	}
	// Read below the line, past it by the time it is armed.
	if err := memcg.Arm("missed", dir, usage/2, 0); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Second)
	for w.count(WokenByMemcgThreshold) == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if w.count(WokenByMemcgThreshold) == 0 {
		t.Error("no wake-up for a line usage passed between the reading and the arming")
	}
}
