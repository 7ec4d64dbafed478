package qos

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"nodeagent/internal/sat"
)

// The kubelet's oom_score_adj constants (pkg/kubelet/qos/policy.go).
const (
	GuaranteedOOMScoreAdj = -997
	BestEffortOOMScoreAdj = 1000
	// Burstable containers land in [BurstableMinOOMScoreAdj, BurstableMaxOOMScoreAdj].
	BurstableMinOOMScoreAdj = 3
	BurstableMaxOOMScoreAdj = 999

	// SystemNodeCritical is the priority class whose pods get the Guaranteed
	// score whatever their QoS.
	SystemNodeCritical = "system-node-critical"
)

// ContainerOOMScoreAdj is the kubelet's oom_score_adj for container c of pod
// on a node with memCapacity bytes of memory: -997 for Guaranteed and
// node-critical pods, 1000 for BestEffort, and for Burstable
// 1000 - 1000*request/capacity clamped to [3, 999]. Sidecars get a score no
// higher than the regular container with the smallest memory request.
func ContainerOOMScoreAdj(pod *corev1.Pod, c *corev1.Container, memCapacity int64, critical bool) int {
	if critical && pod.Spec.PriorityClassName == SystemNodeCritical {
		return GuaranteedOOMScoreAdj
	}
	switch Class(pod) {
	case corev1.PodQOSGuaranteed:
		return GuaranteedOOMScoreAdj
	case corev1.PodQOSBestEffort:
		return BestEffortOOMScoreAdj
	}
	if memCapacity <= 0 {
		return BurstableMaxOOMScoreAdj
	}
	// A pod-level memory request beyond the containers' is shared out
	// evenly among them (the kubelet's policy.go).
	var share int64
	if PodLevelSet(pod) {
		requests := ContainerRequests(pod)
		if rest := sat.Value(*pod.Spec.Resources.Requests.Memory()) - sat.Value(*requests.Memory()); rest > 0 {
			share = rest / int64(len(pod.Spec.Containers)+len(pod.Spec.InitContainers))
		}
	}
	adj := burstableAdj(sat.Add(sat.Value(*c.Resources.Requests.Memory()), share), memCapacity)
	if IsSidecar(c) {
		// A sidecar is never killed before the regular containers it serves:
		// its score is capped at that of the smallest regular request.
		if regular := burstableAdj(sat.Add(minRegularMemoryRequest(pod), share), memCapacity); regular < adj {
			adj = regular
		}
	}
	return adj
}

func burstableAdj(req, capacity int64) int {
	adj := 1000 - int(min(sat.Mul(1000, req)/capacity, 1000))
	if adj < BurstableMinOOMScoreAdj {
		return BurstableMinOOMScoreAdj
	}
	if adj >= 1000 {
		return BurstableMaxOOMScoreAdj
	}
	return adj
}

// defaultMemoryRequest is what the kubelet assumes for a regular container
// without a memory request when it scores sidecars (scheduler defaults).
const defaultMemoryRequest = 200 << 20

func minRegularMemoryRequest(pod *corev1.Pod) int64 {
	var least int64 = -1
	for i := range pod.Spec.Containers {
		req := sat.Value(*pod.Spec.Containers[i].Resources.Requests.Memory())
		if req == 0 {
			req = defaultMemoryRequest
		}
		if least < 0 || req < least {
			least = req
		}
	}
	if least < 0 {
		return defaultMemoryRequest
	}
	return least
}

// OOMScoreRange is the range of oom_score_adj values this host lets the
// runtime set. Without CAP_SYS_RESOURCE a process cannot go below the lowest
// value it inherited (usually 0), so the kubelet's negative scores are refused.
type OOMScoreRange struct {
	Min int // lowest settable value, -1000 when unrestricted
}

// Unrestricted is the range of a host that accepts every score.
var Unrestricted = OOMScoreRange{Min: -1000}

// Restricted reports whether some kubelet scores fall outside the range.
func (r OOMScoreRange) Restricted() bool { return r.Min > GuaranteedOOMScoreAdj }

// Map moves a kubelet score into the range while keeping the order
// BestEffort > Burstable (by request) > Guaranteed: scores the host accepts
// are kept; Guaranteed (-997) becomes Min; when Min also cuts into the
// Burstable band, that band is squeezed linearly into [Min+1, 999].
func (r OOMScoreRange) Map(adj int) int {
	if !r.Restricted() || adj >= BestEffortOOMScoreAdj {
		return adj
	}
	if adj < BurstableMinOOMScoreAdj {
		return r.Min
	}
	if r.Min < BurstableMinOOMScoreAdj {
		return adj
	}
	lo := r.Min + 1
	if lo > BurstableMaxOOMScoreAdj {
		return BurstableMaxOOMScoreAdj
	}
	span := BurstableMaxOOMScoreAdj - BurstableMinOOMScoreAdj
	return lo + (adj-BurstableMinOOMScoreAdj)*(BurstableMaxOOMScoreAdj-lo)/span
}

// String describes the mapping for the start-up log.
func (r OOMScoreRange) String() string {
	if !r.Restricted() {
		return "oom_score_adj: kubelet values (Guaranteed -997, Burstable 3..999, BestEffort 1000)"
	}
	if r.Min < BurstableMinOOMScoreAdj {
		return fmt.Sprintf("oom_score_adj: host refuses values below %d (no CAP_SYS_RESOURCE); Guaranteed and node-critical get %d, Burstable 3..999 and BestEffort 1000 as the kubelet", r.Min, r.Min)
	}
	return fmt.Sprintf("oom_score_adj: host refuses values below %d (no CAP_SYS_RESOURCE); Guaranteed gets %d, Burstable is squeezed into %d..999, BestEffort 1000", r.Min, r.Min, r.Map(BurstableMinOOMScoreAdj))
}
