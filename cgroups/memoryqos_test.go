package cgroups

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// The kubelet's memory.high: floor((req + factor × (limit or allocatable −
// req)) / page) × page, none when req = limit or the result is not above
// the request.
func TestMemoryQoSHighIsTheKubeletsFormula(t *testing.T) {
	const mi, gi, page = int64(1 << 20), int64(1 << 30), int64(4096)
	for _, tc := range []struct {
		name                        string
		request, limit, allocatable int64
		factor                      float64
		want                        int64
	}{
		// The KEP's example: 947.2Mi, rounded down to a page.
		{"request 256Mi, limit 1Gi", 256 * mi, gi, 8 * gi, 0.9, 993210368},
		{"no request", 0, gi, 8 * gi, 0.9, 966365184},
		{"no limit: towards allocatable", 256 * mi, 0, 4 * gi, 0.9, 3892314112},
		{"guaranteed: none", gi, gi, 8 * gi, 0.9, 0},
		{"no limit, no allocatable: none", 256 * mi, 0, 0, 0.9, 0},
		{"not above the request: none", 256 * mi, 256*mi + 100, 8 * gi, 0.5, 0},
		{"factor 1: the limit", 256 * mi, gi, 8 * gi, 1, gi},
	} {
		if got := MemoryQoSHigh(tc.request, tc.limit, tc.allocatable, tc.factor, page); got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.want)
		}
	}
}

// The kubelet's setMemoryQoS: burstable = Σ Burstable requests, kubepods
// = that plus Σ Guaranteed requests; BestEffort pods add nothing.
func TestMemoryQoSMinimums(t *testing.T) {
	pods := []*corev1.Pod{
		pod("g", corev1.ResourceRequirements{Requests: rl("cpu", "1", "memory", "1Gi"), Limits: rl("cpu", "1", "memory", "1Gi")}),
		pod("b1", corev1.ResourceRequirements{Requests: rl("memory", "256Mi")}),
		pod("b2", corev1.ResourceRequirements{Requests: rl("memory", "128Mi")}, corev1.ResourceRequirements{Requests: rl("memory", "128Mi"), Limits: rl("memory", "1Gi")}),
		pod("be", corev1.ResourceRequirements{}),
	}
	kubepods, burstable := MemoryQoSMinimums(pods)
	if burstable != 512<<20 || kubepods != 1536<<20 {
		t.Errorf("kubepods %d burstable %d, want 1.5Gi and 512Mi", kubepods, burstable)
	}
}

func TestMemoryQoSValuesReachTheCgroups(t *testing.T) {
	b := pod("b", corev1.ResourceRequirements{Requests: rl("memory", "256Mi"), Limits: rl("memory", "1Gi")})
	be := pod("be", corev1.ResourceRequirements{})
	if rc := PodConfig(b, PodOptions{MemoryQoS: true}); rc.MemoryMin == nil || *rc.MemoryMin != 256<<20 {
		t.Errorf("burstable pod with memoryQoS: memory.min %v, want its request", rc.MemoryMin)
	}
	if rc := PodConfig(b, PodOptions{}); rc.MemoryMin != nil {
		t.Errorf("without memoryQoS: memory.min %d", *rc.MemoryMin)
	}
	if rc := PodConfig(be, PodOptions{MemoryQoS: true}); rc.MemoryMin != nil {
		t.Errorf("besteffort pod: memory.min %d, want none", *rc.MemoryMin)
	}

	min := int64(64 << 20)
	if r := V2Resources(&ResourceConfig{MemoryMin: &min}); r.Memory == nil || r.Memory.Min == nil || *r.Memory.Min != min || r.Memory.Max != nil {
		t.Errorf("v2 resources %+v, want memory.min %d and no memory.max", r.Memory, min)
	}
	if r := V1Resources(&ResourceConfig{MemoryMin: &min}); r.Memory != nil {
		t.Errorf("v1 resources %+v: v1 has no memory.min", r.Memory)
	}
	found := false
	for _, p := range SystemdProperties(&ResourceConfig{MemoryMin: &min}) {
		if p.Name == "MemoryMin" && p.Value.Value() == uint64(min) {
			found = true
		}
	}
	if !found {
		t.Errorf("systemd properties %v, want MemoryMin %d", SystemdProperties(&ResourceConfig{MemoryMin: &min}), min)
	}

	// The tree: kubepods and burstable get the sums, also when they fall to 0.
	mem := int64(8 << 30)
	for _, active := range [][]*corev1.Pod{{b, be}, nil} {
		mgr := &memManager{sets: map[string]*ResourceConfig{}}
		tree := NewTree(mgr, TreeConfig{Root: ParseCgroupfs("/test"), PerQOS: true, Allocatable: &ResourceConfig{Memory: &mem}, MemoryQoS: true})
		if err := tree.Sync(active); err != nil {
			t.Fatal(err)
		}
		want := int64(0)
		if len(active) > 0 {
			want = 256 << 20
		}
		kp, burst := mgr.sets["/test/kubepods"], mgr.sets["/test/kubepods/burstable"]
		if kp.MemoryMin == nil || *kp.MemoryMin != want || kp.Memory == nil || *kp.Memory != mem {
			t.Errorf("%d pods: kubepods %+v, want memory.min %d beside its limit", len(active), kp, want)
		}
		if burst.MemoryMin == nil || *burst.MemoryMin != want {
			t.Errorf("%d pods: burstable memory.min %v, want %d", len(active), burst.MemoryMin, want)
		}
	}
	mgr := &memManager{sets: map[string]*ResourceConfig{}}
	NewTree(mgr, TreeConfig{Root: ParseCgroupfs("/test"), PerQOS: true, Allocatable: &ResourceConfig{Memory: &mem}}).Sync([]*corev1.Pod{b})
	if kp := mgr.sets["/test/kubepods"]; kp.MemoryMin != nil {
		t.Errorf("without memoryQoS: kubepods memory.min %d", *kp.MemoryMin)
	}
}
