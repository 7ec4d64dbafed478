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
		{"besteffort: towards allocatable", 0, 0, 4 * gi, 0.9, 3865468928},
		{"no limit, no allocatable: none", 256 * mi, 0, 0, 0.9, 0},
		{"not above the request: none", 256 * mi, 256*mi + 100, 8 * gi, 0.5, 0},
		{"factor 1: the limit", 256 * mi, gi, 8 * gi, 1, gi},
	} {
		if got := MemoryQoSHigh(tc.request, tc.limit, tc.allocatable, tc.factor, page); got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.want)
		}
	}
}

// The kubelet's getQoSMemoryRequests: the Guaranteed and Burstable sums;
// BestEffort pods add nothing.
func TestMemoryRequestsByQoS(t *testing.T) {
	pods := []*corev1.Pod{
		pod("g", corev1.ResourceRequirements{Requests: rl("cpu", "1", "memory", "1Gi"), Limits: rl("cpu", "1", "memory", "1Gi")}),
		pod("b1", corev1.ResourceRequirements{Requests: rl("memory", "256Mi")}),
		pod("b2", corev1.ResourceRequirements{Requests: rl("memory", "128Mi")}, corev1.ResourceRequirements{Requests: rl("memory", "128Mi"), Limits: rl("memory", "1Gi")}),
		pod("be", corev1.ResourceRequirements{}),
	}
	guaranteed, burstable := MemoryRequestsByQoS(pods)
	if burstable != 512<<20 || guaranteed != 1<<30 {
		t.Errorf("guaranteed %d burstable %d, want 1Gi and 512Mi", guaranteed, burstable)
	}
}

// 1.37's TieredReservation: memory.min for a Guaranteed pod, memory.low
// for a Burstable one, nothing for BestEffort; None protects no pod.
func TestTieredMemoryProtectsPodsByQoS(t *testing.T) {
	g := pod("g", corev1.ResourceRequirements{Requests: rl("cpu", "1", "memory", "1Gi"), Limits: rl("cpu", "1", "memory", "1Gi")})
	b := pod("b", corev1.ResourceRequirements{Requests: rl("memory", "256Mi"), Limits: rl("memory", "1Gi")})
	be := pod("be", corev1.ResourceRequirements{})
	if rc := PodConfig(g, PodOptions{TieredMemory: true}); rc.MemoryMin == nil || *rc.MemoryMin != 1<<30 || rc.MemoryLow != nil {
		t.Errorf("guaranteed pod: memory.min %v low %v, want min 1Gi and no low", rc.MemoryMin, rc.MemoryLow)
	}
	if rc := PodConfig(b, PodOptions{TieredMemory: true}); rc.MemoryLow == nil || *rc.MemoryLow != 256<<20 || rc.MemoryMin != nil {
		t.Errorf("burstable pod: memory.low %v min %v, want low 256Mi and no min", rc.MemoryLow, rc.MemoryMin)
	}
	for _, p := range []*corev1.Pod{g, b, be} {
		if rc := PodConfig(p, PodOptions{}); rc.MemoryMin != nil || rc.MemoryLow != nil {
			t.Errorf("%s without TieredMemory: memory.min %v low %v, want neither", p.Name, rc.MemoryMin, rc.MemoryLow)
		}
	}
	if rc := PodConfig(be, PodOptions{TieredMemory: true}); rc.MemoryMin != nil || rc.MemoryLow != nil {
		t.Errorf("besteffort pod: memory.min %v low %v, want neither", rc.MemoryMin, rc.MemoryLow)
	}
}

func TestMemoryProtectionReachesTheCgroups(t *testing.T) {
	v := int64(64 << 20)
	if r := V2Resources(&ResourceConfig{MemoryMin: &v, MemoryLow: &v}); r.Memory == nil || r.Memory.Min == nil || *r.Memory.Min != v || r.Memory.Low == nil || *r.Memory.Low != v || r.Memory.Max != nil {
		t.Errorf("v2 resources %+v, want memory.min and memory.low %d and no memory.max", r.Memory, v)
	}
	if r := V1Resources(&ResourceConfig{MemoryMin: &v, MemoryLow: &v}); r.Memory != nil {
		t.Errorf("v1 resources %+v: v1 has no memory.min or memory.low", r.Memory)
	}
	props := map[string]uint64{}
	for _, p := range SystemdProperties(&ResourceConfig{MemoryMin: &v, MemoryLow: &v}) {
		if n, ok := p.Value.Value().(uint64); ok {
			props[p.Name] = n
		}
	}
	if props["MemoryMin"] != uint64(v) || props["MemoryLow"] != uint64(v) {
		t.Errorf("systemd properties %v, want MemoryMin and MemoryLow %d", props, v)
	}
}

// The QoS level (the kubelet's setMemoryQoS): under TieredReservation
// kubepods memory.min = Guaranteed + Burstable requests, kubepods and
// burstable memory.low = Burstable requests, rewritten when the sums fall
// to 0; ResetMemoryProtection writes zeros; NoMemoryProtection nothing.
func TestQoSMemoryProtection(t *testing.T) {
	g := pod("g", corev1.ResourceRequirements{Requests: rl("cpu", "1", "memory", "1Gi"), Limits: rl("cpu", "1", "memory", "1Gi")})
	b := pod("b", corev1.ResourceRequirements{Requests: rl("memory", "256Mi"), Limits: rl("memory", "1Gi")})
	be := pod("be", corev1.ResourceRequirements{})
	mem := int64(8 << 30)
	is := func(p *int64, want int64) bool { return p != nil && *p == want }
	for _, tc := range []struct {
		name             string
		protection       MemoryProtection
		active           []*corev1.Pod
		kubepodsMin, low int64
	}{
		{"tiered", TieredMemoryProtection, []*corev1.Pod{g, b, be}, (1 << 30) + (256 << 20), 256 << 20},
		{"tiered, no pods left", TieredMemoryProtection, nil, 0, 0},
		{"reset", ResetMemoryProtection, []*corev1.Pod{g, b, be}, 0, 0},
	} {
		mgr := &memManager{sets: map[string]*ResourceConfig{}}
		tree := NewTree(mgr, TreeConfig{Root: ParseCgroupfs("/test"), PerQOS: true, Allocatable: &ResourceConfig{Memory: &mem}, MemoryProtection: tc.protection})
		if err := tree.Sync(tc.active); err != nil {
			t.Fatal(err)
		}
		kp, burst := mgr.sets["/test/kubepods"], mgr.sets["/test/kubepods/burstable"]
		if !is(kp.MemoryMin, tc.kubepodsMin) || !is(kp.MemoryLow, tc.low) || !is(kp.Memory, mem) {
			t.Errorf("%s: kubepods %+v, want memory.min %d, memory.low %d beside its limit", tc.name, kp, tc.kubepodsMin, tc.low)
		}
		if !is(burst.MemoryLow, tc.low) || burst.MemoryMin != nil {
			t.Errorf("%s: burstable memory.low %v min %v, want low %d and no min", tc.name, burst.MemoryLow, burst.MemoryMin, tc.low)
		}
	}
	mgr := &memManager{sets: map[string]*ResourceConfig{}}
	NewTree(mgr, TreeConfig{Root: ParseCgroupfs("/test"), PerQOS: true, Allocatable: &ResourceConfig{Memory: &mem}}).Sync([]*corev1.Pod{g, b})
	if kp, burst := mgr.sets["/test/kubepods"], mgr.sets["/test/kubepods/burstable"]; kp.MemoryMin != nil || kp.MemoryLow != nil || burst.MemoryLow != nil {
		t.Errorf("NoMemoryProtection (v1): kubepods %+v burstable %+v, want no memory.min or memory.low", kp, burst)
	}
}
