package cgroups

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// The kubelet's setMemoryReserve: burstable = allocatable − pct × Σ
// Guaranteed requests; besteffort = burstable − pct × Σ Burstable requests.
func TestQOSReservedMemoryIsTheKubeletsFormula(t *testing.T) {
	// Guaranteed pods need cpu and memory limits equal to their requests.
	pods := []*corev1.Pod{
		pod("g1", corev1.ResourceRequirements{Requests: rl("cpu", "1", "memory", "1Gi"), Limits: rl("cpu", "1", "memory", "1Gi")}),
		pod("g2", corev1.ResourceRequirements{Requests: rl("cpu", "1", "memory", "1Gi"), Limits: rl("cpu", "1", "memory", "1Gi")},
			corev1.ResourceRequirements{Requests: rl("cpu", "1", "memory", "512Mi"), Limits: rl("cpu", "1", "memory", "512Mi")}),
		pod("b", corev1.ResourceRequirements{Requests: rl("memory", "1Gi")}),
		pod("be", corev1.ResourceRequirements{}),
	}
	const gi, mi = int64(1 << 30), int64(1 << 20)
	for _, tc := range []struct {
		pct                   int64
		burstable, bestEffort int64
	}{
		{100, 8*gi - 2*gi - 512*mi, 8*gi - 3*gi - 512*mi},
		{50, 8*gi - gi - 256*mi, 8*gi - gi - 256*mi - 512*mi},
		{0, 8 * gi, 8 * gi},
	} {
		b, be := QOSReservedMemory(8*gi, tc.pct, pods)
		if b != tc.burstable || be != tc.bestEffort {
			t.Errorf("%d%%: burstable %d besteffort %d, want %d and %d", tc.pct, b, be, tc.burstable, tc.bestEffort)
		}
	}
}

func TestTreeWritesTheReserveOnlyWhenConfigured(t *testing.T) {
	mem, pct := int64(8<<30), int64(100)
	g := pod("g", corev1.ResourceRequirements{Requests: rl("cpu", "1", "memory", "2Gi"), Limits: rl("cpu", "1", "memory", "2Gi")})
	b := pod("b", corev1.ResourceRequirements{Requests: rl("memory", "1Gi")})
	for _, reserve := range []*int64{nil, &pct} {
		mgr := &memManager{sets: map[string]*ResourceConfig{}}
		tree := NewTree(mgr, TreeConfig{Root: ParseCgroupfs("/test"), PerQOS: true, Allocatable: &ResourceConfig{Memory: &mem}, MemoryReserve: reserve})
		if err := tree.Sync([]*corev1.Pod{g, b}); err != nil {
			t.Fatal(err)
		}
		burst, be := mgr.sets["/test/kubepods/burstable"].Memory, mgr.sets["/test/kubepods/besteffort"].Memory
		switch {
		case reserve == nil && (burst != nil || be != nil):
			t.Errorf("no qosReserved: burstable %v besteffort %v, want memory left alone", burst, be)
		case reserve != nil && (burst == nil || be == nil || *burst != 6<<30 || *be != 5<<30):
			t.Errorf("qosReserved 100%%: burstable %v besteffort %v, want 6Gi and 5Gi", burst, be)
		}
	}
}

// usageManager is a memManager over a fake v1 memory hierarchy whose
// writes of a limit below the cgroup's usage fail as the kernel's do.
type usageManager struct {
	memManager
	dir   string
	usage int64
}

func (m *usageManager) Path(n Name) string { return filepath.Join(m.dir, n.Cgroupfs()) }

func (m *usageManager) Set(n Name, rc *ResourceConfig) error {
	if rc.Memory != nil && *rc.Memory < m.usage {
		return fmt.Errorf("write memory.limit_in_bytes: %w", syscall.EBUSY)
	}
	return m.memManager.Set(n, rc)
}

// A reserve below what the class already uses is refused by the kernel;
// the limit is then the usage, which stops growth, as in the kubelet's
// retrySetMemoryReserve.
func TestReserveBelowUsageCapsAtUsage(t *testing.T) {
	mgr := &usageManager{memManager: memManager{sets: map[string]*ResourceConfig{}}, dir: t.TempDir(), usage: 7 << 30}
	for _, class := range []string{"burstable", "besteffort"} {
		dir := filepath.Join(mgr.dir, "test/kubepods", class)
		os.MkdirAll(dir, 0o755)
		for file, body := range map[string]string{
			"memory.stat": "total_inactive_file 0\n", "memory.usage_in_bytes": strconv.FormatInt(mgr.usage, 10),
			"memory.limit_in_bytes": "9223372036854771712", "memory.oom_control": "oom_kill 0\n",
		} {
			os.WriteFile(filepath.Join(dir, file), []byte(body), 0o644)
		}
	}
	mem, pct := int64(8<<30), int64(100)
	tree := NewTree(mgr, TreeConfig{Root: ParseCgroupfs("/test"), PerQOS: true, Allocatable: &ResourceConfig{Memory: &mem}, MemoryReserve: &pct})
	g := pod("g", corev1.ResourceRequirements{Requests: rl("cpu", "1", "memory", "2Gi"), Limits: rl("cpu", "1", "memory", "2Gi")})
	if err := tree.SyncQoS([]*corev1.Pod{g}); err != nil {
		t.Fatalf("sync with usage above the reserve: %v, want the limit capped at the usage", err)
	}
	for _, class := range []string{"burstable", "besteffort"} {
		if got := mgr.sets["/test/kubepods/"+class].Memory; got == nil || *got != 7<<30 {
			t.Errorf("%s limit %v, want the usage 7Gi (the reserve, 6Gi, is below it)", class, got)
		}
	}
}
