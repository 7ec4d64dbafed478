package cgroups

import (
	"math"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"nodeagent/internal/qos"
	"nodeagent/internal/sat"
)

// The kubelet's CPU constants (pkg/kubelet/cm/helpers_linux.go).
const (
	MinShares      = 2
	MaxShares      = 262144
	SharesPerCPU   = 1024
	MilliCPUToCPU  = 1000
	QuotaPeriod    = 100000 // µs
	MinQuotaPeriod = 1000   // µs
	// MinMilliCPULimit is the smallest CPU limit the quota holds apart
	// (1 ms per 100 ms period).
	MinMilliCPULimit = 10
	MaxWeight        = 10000 // cgroup v2 cpu.weight
	// MaxQuota is the largest CFS quota the kernel takes, in µs
	// (max_cfs_runtime in kernel/sched/core.c: 2^44-1 µs).
	MaxQuota = 1<<44 - 1
)

// ResourceConfig holds the values the agent writes to one cgroup; nil fields
// are left as they are.
type ResourceConfig struct {
	CPUShares *uint64 // v1 cpu.shares; v2 cpu.weight via SharesToWeight
	CPUQuota  *int64  // µs per period, -1 = unlimited
	CPUPeriod *uint64 // µs
	Memory    *int64  // bytes
	// MemoryMin is memory.min (memoryQoS; cgroup v2 only, v1 has no such
	// protection): bytes the kernel does not reclaim from the cgroup.
	MemoryMin *int64
	// MemoryLow is memory.low (memoryQoS, v2 only): bytes the kernel
	// reclaims only when nothing unprotected is left.
	MemoryLow *int64
	PidsLimit *int64
}

// MilliCPUToShares converts a cpu request to cpu.shares, clamped to [2, 262144].
func MilliCPUToShares(milliCPU int64) uint64 {
	if milliCPU <= 0 {
		return MinShares
	}
	shares := sat.Mul(milliCPU, SharesPerCPU) / MilliCPUToCPU
	if shares < MinShares {
		return MinShares
	}
	if shares > MaxShares {
		return MaxShares
	}
	return uint64(shares)
}

// MilliCPUToQuota converts a cpu limit to a CFS quota for period (µs); 0 means
// no limit and the quota is never below 1 ms. A limit the kernel cannot
// hold (above MaxQuota, some 176 billion CPUs at the default period) is
// no limit (-1): the kernel refuses such a quota, and a write that always
// fails left the pod's cgroup half made.
func MilliCPUToQuota(milliCPU int64, period int64) int64 {
	if milliCPU == 0 {
		return 0
	}
	quota := sat.Mul(milliCPU, period) / MilliCPUToCPU
	switch {
	case quota > MaxQuota:
		return -1
	case quota < MinQuotaPeriod:
		return MinQuotaPeriod
	}
	return quota
}

// SharesToMilliCPU is the cpu request shares stand for, rounded up (the
// kubelet's SharesToMilliCPU); below the minimum shares, 0.
func SharesToMilliCPU(shares uint64) int64 {
	if shares < MinShares {
		return 0
	}
	return int64((shares*MilliCPUToCPU + SharesPerCPU - 1) / SharesPerCPU)
}

// WeightToShares maps cpu.weight back to cpu.shares (the kubelet's
// CpuWeightToCpuShares), the inverse of SharesToWeight up to rounding.
func WeightToShares(weight uint64) uint64 {
	if weight < 1 {
		weight = 1
	}
	return (weight-1)*(MaxShares-MinShares)/(MaxWeight-1) + MinShares
}

// SharesToWeight is the kubelet's linear mapping of cpu.shares [2, 262144] to
// cgroup v2 cpu.weight [1, 10000] (KEP-2254), used for pod, QoS and kubepods
// cgroups. Container weights are the OCI runtime's business.
func SharesToWeight(shares uint64) uint64 {
	if shares >= MaxShares {
		return MaxWeight
	}
	if shares < MinShares {
		shares = MinShares
	}
	return 1 + ((shares-MinShares)*(MaxWeight-1))/(MaxShares-MinShares)
}

// PodOptions are the node settings that shape pod cgroup values.
type PodOptions struct {
	EnforceCPULimits bool   // cpuCFSQuota
	CPUPeriod        uint64 // cpuCFSQuotaPeriod in µs; 0 means 100000
	PidsLimit        int64  // podPidsLimit; <= 0 leaves pids.max alone
	// ExclusiveCPUs reports whether the CPU manager gave a container of the
	// pod CPUs of its own: its pod cgroup then has no CFS quota, as in the
	// kubelet 1.37 (nil: none has).
	ExclusiveCPUs func(types.UID) bool
	// TieredMemory protects the pod's summed memory requests, as the
	// kubelet's memoryReservationPolicy TieredReservation does on cgroup
	// v2: memory.min for a Guaranteed pod, memory.low for a Burstable one.
	TieredMemory bool
}

// PodConfig is the kubelet's ResourceConfigForPod: shares from the summed cpu
// requests; for Guaranteed pods also the CFS quota and the memory limit; for
// Burstable pods the quota only when every container has a cpu limit and the
// memory limit only when every container has a memory limit; for BestEffort
// pods only the minimum shares.
func PodConfig(pod *corev1.Pod, opts PodOptions) *ResourceConfig {
	period := opts.CPUPeriod
	if period == 0 {
		period = QuotaPeriod
	}
	requests, limits := qos.PodRequests(pod), qos.PodLimits(pod)
	shares := MilliCPUToShares(sat.MilliValue(*requests.Cpu()))
	quota := MilliCPUToQuota(sat.MilliValue(*limits.Cpu()), int64(period))
	if !opts.EnforceCPULimits || (opts.ExclusiveCPUs != nil && opts.ExclusiveCPUs(pod.UID)) {
		quota = -1
	}
	memory := sat.Value(*limits.Memory())

	rc := &ResourceConfig{}
	switch qos.Class(pod) {
	case corev1.PodQOSGuaranteed:
		rc.CPUShares, rc.CPUQuota, rc.CPUPeriod, rc.Memory = &shares, &quota, &period, &memory
	case corev1.PodQOSBurstable:
		rc.CPUShares = &shares
		if qos.AllHaveLimit(pod, corev1.ResourceCPU) {
			rc.CPUQuota, rc.CPUPeriod = &quota, &period
		}
		if qos.AllHaveLimit(pod, corev1.ResourceMemory) {
			rc.Memory = &memory
		}
	default:
		min := uint64(MinShares)
		rc.CPUShares = &min
	}
	if opts.PidsLimit > 0 {
		pids := opts.PidsLimit
		rc.PidsLimit = &pids
	}
	if request := sat.Value(*requests.Memory()); opts.TieredMemory && request > 0 {
		if qos.Class(pod) == corev1.PodQOSGuaranteed {
			rc.MemoryMin = &request
		} else {
			rc.MemoryLow = &request
		}
	}
	return rc
}

// MemoryRequestsByQoS are the active Guaranteed and Burstable pods'
// summed memory requests, what the kubelet's TieredReservation protects
// at the QoS level (QoSMemoryProtection).
func MemoryRequestsByQoS(active []*corev1.Pod) (guaranteed, burstable int64) {
	for _, p := range active {
		requests := qos.PodRequests(p)
		switch qos.Class(p) {
		case corev1.PodQOSBurstable:
			burstable = sat.Add(burstable, sat.Value(*requests.Memory()))
		case corev1.PodQOSGuaranteed:
			guaranteed = sat.Add(guaranteed, sat.Value(*requests.Memory()))
		}
	}
	return guaranteed, burstable
}

// MemoryProtection is what memory QoS writes at the QoS level.
type MemoryProtection int

const (
	// NoMemoryProtection writes nothing: cgroup v1, which has no
	// memory.min or memory.low.
	NoMemoryProtection MemoryProtection = iota
	// ResetMemoryProtection writes zeros on v2, so no protection set
	// before (an older policy, another agent) outlives it: the kubelet's
	// memoryReservationPolicy None or MemoryQoS off.
	ResetMemoryProtection
	// TieredMemoryProtection is TieredReservation: kubepods memory.min
	// covers the Guaranteed and Burstable requests and memory.low the
	// Burstable ones; the burstable cgroup's memory.low the Burstable ones.
	TieredMemoryProtection
)

// QoSMemoryProtection sets kubepods' and the burstable cgroup's
// memory.min and memory.low for p (the kubelet's setMemoryQoS and its
// start-up reset).
func QoSMemoryProtection(p MemoryProtection, active []*corev1.Pod, kubepods, burstable *ResourceConfig) {
	var guaranteed, burstableSum int64
	switch p {
	case NoMemoryProtection:
		return
	case TieredMemoryProtection:
		guaranteed, burstableSum = MemoryRequestsByQoS(active)
	}
	min, low := sat.Add(guaranteed, burstableSum), burstableSum
	kubepods.MemoryMin, kubepods.MemoryLow, burstable.MemoryLow = &min, &low, &low
}

// MemoryQoSHigh is the kubelet's memory.high for a container under
// memoryQoS: its request plus factor of the way to its limit (or, without
// one, to the node's allocatable memory), rounded down to a page. It is 0
// (none) for a container whose request equals its set limit, and where the
// result would not be above the request.
func MemoryQoSHigh(request, limit, allocatable int64, factor float64, pageSize int64) int64 {
	if request == limit && request != 0 {
		return 0
	}
	ceiling := limit
	if ceiling == 0 {
		ceiling = allocatable
	}
	if ceiling <= 0 {
		return 0
	}
	high := int64(math.Floor((float64(request)+(float64(ceiling)-float64(request))*factor)/float64(pageSize))) * pageSize
	if high <= request {
		return 0
	}
	return high
}

// BurstableConfig is the burstable QoS cgroup: shares for the summed cpu
// requests of its pods (min 2).
func BurstableConfig(burstablePods []*corev1.Pod) *ResourceConfig {
	var milli int64
	for _, p := range burstablePods {
		requests := qos.PodRequests(p)
		milli = sat.Add(milli, sat.MilliValue(*requests.Cpu()))
	}
	shares := MilliCPUToShares(milli)
	return &ResourceConfig{CPUShares: &shares}
}

// QOSReservedMemory is the kubelet's qosReserved for memory: the burstable
// cgroup's limit is the allocatable memory less percent of the Guaranteed
// pods' requests, and the besteffort cgroup's that less percent of the
// Burstable pods' requests, so lower classes cannot burst into memory the
// higher ones requested. As in the kubelet, nothing is clamped.
func QOSReservedMemory(allocatable, percent int64, active []*corev1.Pod) (burstable, bestEffort int64) {
	requested := map[corev1.PodQOSClass]int64{}
	for _, p := range active {
		class := qos.Class(p)
		if class == corev1.PodQOSBestEffort {
			continue
		}
		requests := qos.PodRequests(p)
		requested[class] = sat.Add(requested[class], sat.Value(*requests.Memory()))
	}
	burstable = allocatable - sat.Mul(requested[corev1.PodQOSGuaranteed], percent)/100
	bestEffort = burstable - sat.Mul(requested[corev1.PodQOSBurstable], percent)/100
	return burstable, bestEffort
}

// BestEffortConfig is the besteffort QoS cgroup: always the minimum shares.
func BestEffortConfig() *ResourceConfig {
	shares := uint64(MinShares)
	return &ResourceConfig{CPUShares: &shares}
}

// NodeAllocatableConfig is the kubepods cgroup: capacity minus the reserved
// amounts (clamped at zero) when enforcePods, else the raw capacity. The
// hard-eviction threshold is deliberately not subtracted: the gap lets the
// agent evict before kubepods itself hits its limit.
func NodeAllocatableConfig(capacity corev1.ResourceList, reserved []corev1.ResourceList, enforcePods bool) *ResourceConfig {
	alloc := capacity.DeepCopy()
	if enforcePods {
		for _, r := range reserved {
			for name, q := range r {
				if v, ok := alloc[name]; ok {
					v.Sub(q)
					if v.Sign() < 0 {
						v.Set(0)
					}
					alloc[name] = v
				}
			}
		}
	}
	rc := &ResourceConfig{}
	if q, ok := alloc[corev1.ResourceCPU]; ok {
		shares := MilliCPUToShares(sat.MilliValue(q))
		rc.CPUShares = &shares
	}
	if q, ok := alloc[corev1.ResourceMemory]; ok {
		mem := sat.Value(q)
		rc.Memory = &mem
	}
	if q, ok := alloc[PIDResource]; ok {
		pids := sat.Value(q)
		rc.PidsLimit = &pids
	}
	return rc
}

// PIDResource is the "pid" entry of systemReserved/kubeReserved and of the
// node's internal capacity.
const PIDResource corev1.ResourceName = "pid"
