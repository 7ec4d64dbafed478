package cgroups

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
)

// The reference's worked table (kubelet.md §1.3).
func TestCPUConversions(t *testing.T) {
	cases := []struct {
		milli  int64
		shares uint64
		quota  int64
		weight uint64
	}{
		{0, 2, 0, 1},
		{10, 10, 1000, 1},
		{100, 102, 10000, 4},
		{250, 256, 25000, 10},
		{500, 512, 50000, 20},
		{1000, 1024, 100000, 39},
		{2000, 2048, 200000, 79},
		{8000, 8192, 800000, 313},
		{64000, 65536, 6400000, 2500},
	}
	for _, tc := range cases {
		if got := MilliCPUToShares(tc.milli); got != tc.shares {
			t.Errorf("MilliCPUToShares(%d) = %d, want %d", tc.milli, got, tc.shares)
		}
		if got := MilliCPUToQuota(tc.milli, QuotaPeriod); got != tc.quota {
			t.Errorf("MilliCPUToQuota(%d) = %d, want %d", tc.milli, got, tc.quota)
		}
		if got := SharesToWeight(tc.shares); got != tc.weight {
			t.Errorf("SharesToWeight(%d) = %d, want %d", tc.shares, got, tc.weight)
		}
	}
	if got := MilliCPUToShares(1_000_000); got != MaxShares {
		t.Errorf("shares clamp high: %d", got)
	}
	if got := MilliCPUToShares(1); got != MinShares {
		t.Errorf("shares clamp low: %d", got)
	}
	if got := SharesToWeight(MaxShares); got != MaxWeight {
		t.Errorf("weight at max shares: %d", got)
	}
	if got := MilliCPUToQuota(5, 50000); got != MinQuotaPeriod {
		t.Errorf("quota floor: %d", got)
	}
	// Back from shares and weights, as the kubelet reads a pod cgroup.
	for shares, milli := range map[uint64]int64{1: 0, 2: 2, 102: 100, 1024: 1000, 870: 850} {
		if got := SharesToMilliCPU(shares); got != milli {
			t.Errorf("SharesToMilliCPU(%d) = %d, want %d", shares, got, milli)
		}
	}
	for weight, shares := range map[uint64]uint64{1: 2, 39: 998, 10000: MaxShares} {
		if got := WeightToShares(weight); got != shares {
			t.Errorf("WeightToShares(%d) = %d, want %d", weight, got, shares)
		}
	}
}

// Values derived from the largest quantities validation lets through (and
// from sums of them) hold at their bounds instead of wrapping: a wrapped
// quota or share count is a write the kernel refuses forever, or a
// Guaranteed pod's cgroup with 2 shares.
func TestConversionsNeverWrap(t *testing.T) {
	const most = int64(1<<63 - 1)
	if got := MilliCPUToShares(most); got != MaxShares {
		t.Errorf("shares for MaxInt64 milli-CPU = %d, want %d", got, MaxShares)
	}
	if got := MilliCPUToQuota(most, QuotaPeriod); got != -1 {
		t.Errorf("quota for MaxInt64 milli-CPU = %d, want -1 (beyond the kernel's maximum: no limit)", got)
	}
	if got := MilliCPUToQuota(MaxQuota/QuotaPeriod*MilliCPUToCPU, QuotaPeriod); got != MaxQuota/QuotaPeriod*QuotaPeriod {
		t.Errorf("quota at the kernel's maximum = %d", got)
	}
	huge := corev1.ResourceRequirements{Requests: rl("cpu", "9223372036854775807m", "memory", "9223372036854775807"),
		Limits: rl("cpu", "9223372036854775807m", "memory", "9223372036854775807")}
	p := pod("huge", huge, huge) // two containers: the sums pass int64
	rc := PodConfig(p, PodOptions{EnforceCPULimits: true})
	if *rc.CPUShares != MaxShares || *rc.CPUQuota != -1 || *rc.Memory != most {
		t.Errorf("huge Guaranteed pod: shares %d quota %d memory %d; want %d, -1, %d", *rc.CPUShares, *rc.CPUQuota, *rc.Memory, MaxShares, most)
	}
	if got := *BurstableConfig([]*corev1.Pod{p, p}).CPUShares; got != MaxShares {
		t.Errorf("burstable shares over huge pods = %d, want %d", got, MaxShares)
	}
}

func rl(pairs ...string) corev1.ResourceList {
	l := corev1.ResourceList{}
	for i := 0; i+1 < len(pairs); i += 2 {
		l[corev1.ResourceName(pairs[i])] = resource.MustParse(pairs[i+1])
	}
	return l
}

func pod(uid string, containers ...corev1.ResourceRequirements) *corev1.Pod {
	p := &corev1.Pod{}
	p.UID = types.UID("uid-" + uid)
	for i, r := range containers {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: string(rune('a' + i)), Resources: r})
	}
	return p
}

func TestPodConfig(t *testing.T) {
	opts := PodOptions{EnforceCPULimits: true, PidsLimit: 1024}
	u64 := func(p *uint64) int64 {
		if p == nil {
			return -999
		}
		return int64(*p)
	}
	i64 := func(p *int64) int64 {
		if p == nil {
			return -999
		}
		return *p
	}
	const unset = -999
	cases := []struct {
		name                            string
		pod                             *corev1.Pod
		shares, quota, period, mem, pid int64
	}{
		{"guaranteed", pod("g", corev1.ResourceRequirements{Requests: rl("cpu", "500m", "memory", "128Mi"), Limits: rl("cpu", "500m", "memory", "128Mi")}),
			512, 50000, 100000, 128 << 20, 1024},
		{"burstable with all limits", pod("b1", corev1.ResourceRequirements{Requests: rl("cpu", "100m", "memory", "64Mi"), Limits: rl("cpu", "1", "memory", "256Mi")}),
			102, 100000, 100000, 256 << 20, 1024},
		{"burstable, one container without limits", pod("b2",
			corev1.ResourceRequirements{Requests: rl("cpu", "100m"), Limits: rl("cpu", "1", "memory", "256Mi")},
			corev1.ResourceRequirements{Requests: rl("cpu", "250m", "memory", "10Mi")}),
			358, unset, unset, unset, 1024},
		{"best effort", pod("be", corev1.ResourceRequirements{}), 2, unset, unset, unset, 1024},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rc := PodConfig(tc.pod, opts)
			if got := u64(rc.CPUShares); got != tc.shares {
				t.Errorf("shares = %d, want %d", got, tc.shares)
			}
			if got := i64(rc.CPUQuota); got != tc.quota {
				t.Errorf("quota = %d, want %d", got, tc.quota)
			}
			if got := u64(rc.CPUPeriod); got != tc.period {
				t.Errorf("period = %d, want %d", got, tc.period)
			}
			if got := i64(rc.Memory); got != tc.mem {
				t.Errorf("memory = %d, want %d", got, tc.mem)
			}
			if got := i64(rc.PidsLimit); got != tc.pid {
				t.Errorf("pids = %d, want %d", got, tc.pid)
			}
		})
	}
	t.Run("cpuCFSQuota off leaves quota unlimited", func(t *testing.T) {
		rc := PodConfig(cases[0].pod, PodOptions{})
		if *rc.CPUQuota != -1 || rc.PidsLimit != nil {
			t.Errorf("quota = %d, pids = %v; want -1 and unset", *rc.CPUQuota, rc.PidsLimit)
		}
	})
	t.Run("custom period", func(t *testing.T) {
		rc := PodConfig(cases[0].pod, PodOptions{EnforceCPULimits: true, CPUPeriod: 50000})
		if *rc.CPUQuota != 25000 || *rc.CPUPeriod != 50000 {
			t.Errorf("quota/period = %d/%d, want 25000/50000", *rc.CPUQuota, *rc.CPUPeriod)
		}
	})
}

func TestQoSConfigs(t *testing.T) {
	if got := *BurstableConfig(nil).CPUShares; got != 2 {
		t.Errorf("empty burstable shares = %d, want 2", got)
	}
	pods := []*corev1.Pod{
		pod("x", corev1.ResourceRequirements{Requests: rl("cpu", "100m")}),
		pod("y", corev1.ResourceRequirements{Requests: rl("cpu", "900m")}),
	}
	if got := *BurstableConfig(pods).CPUShares; got != 1024 {
		t.Errorf("burstable shares = %d, want 1024", got)
	}
	if got := *BestEffortConfig().CPUShares; got != 2 {
		t.Errorf("besteffort shares = %d, want 2", got)
	}
}

func TestNodeAllocatableConfig(t *testing.T) {
	capacity := rl("cpu", "2", "memory", "8Gi", "pid", "32768")
	reserved := []corev1.ResourceList{rl("cpu", "500m", "memory", "1Gi"), rl("memory", "512Mi", "pid", "1000")}
	rc := NodeAllocatableConfig(capacity, reserved, true)
	if *rc.CPUShares != 1536 || *rc.Memory != (8<<30)-(1<<30)-(512<<20) || *rc.PidsLimit != 31768 {
		t.Errorf("enforced: shares %d memory %d pids %d", *rc.CPUShares, *rc.Memory, *rc.PidsLimit)
	}
	rc = NodeAllocatableConfig(capacity, reserved, false)
	if *rc.CPUShares != 2048 || *rc.Memory != 8<<30 {
		t.Errorf("not enforced must be raw capacity: shares %d memory %d", *rc.CPUShares, *rc.Memory)
	}
	rc = NodeAllocatableConfig(capacity, []corev1.ResourceList{rl("memory", "16Gi")}, true)
	if *rc.Memory != 0 {
		t.Errorf("over-reserved memory must clamp to 0, got %d", *rc.Memory)
	}
}

// A pod with exclusive CPUs has no CFS quota on its cgroup, as the kubelet
// 1.37 (DisableCPUQuotaWithExclusiveCPUs); another keeps its quota.
func TestPodConfigWithoutQuotaOnExclusiveCPUs(t *testing.T) {
	g := pod("g", corev1.ResourceRequirements{Requests: rl("cpu", "2", "memory", "128Mi"), Limits: rl("cpu", "2", "memory", "128Mi")})
	opts := PodOptions{EnforceCPULimits: true, ExclusiveCPUs: func(uid types.UID) bool { return uid == g.UID }}
	if q := PodConfig(g, opts).CPUQuota; q == nil || *q != -1 {
		t.Errorf("pinned pod quota %v, want -1", q)
	}
	other := pod("o", corev1.ResourceRequirements{Requests: rl("cpu", "2", "memory", "128Mi"), Limits: rl("cpu", "2", "memory", "128Mi")})
	other.UID = "other"
	if q := PodConfig(other, opts).CPUQuota; q == nil || *q != 200000 {
		t.Errorf("other pod quota %v, want 200000", q)
	}
}
