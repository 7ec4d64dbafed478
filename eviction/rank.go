package eviction

import (
	"sort"

	corev1 "k8s.io/api/core/v1"

	"nodeagent/internal/qos"
)

// Ranking orders eviction candidates.
type Ranking string

const (
	// RankKubelet is the kubelet's order: usage above request first, then
	// lower priority, then larger usage above request.
	RankKubelet Ranking = "kubelet"
	// RankQoS puts BestEffort before Burstable before Guaranteed, then
	// applies the kubelet's keys within each class.
	RankQoS Ranking = "qos"
)

// Candidate is a pod that may be evicted, with its usage of the starved
// resource (bytes, inodes or processes) and its request for it.
type Candidate struct {
	Pod      *corev1.Pod
	Usage    int64
	Request  int64
	HasStats bool
}

// Priority is the pod's priority: spec.priority, else what the API server
// would have set from a system priority class, else 0.
func Priority(pod *corev1.Pod) int32 {
	if pod.Spec.Priority != nil {
		return *pod.Spec.Priority
	}
	switch pod.Spec.PriorityClassName {
	case qos.SystemNodeCritical:
		return 2000001000
	case "system-cluster-critical":
		return 2000000000
	}
	return 0
}

// Critical pods are never evicted: those at system-critical priority
// (2e9 and above). Unlike the kubelet, a static pod is not critical by
// itself, since every pod of this agent is a static pod.
func Critical(pod *corev1.Pod) bool { return Priority(pod) >= 2000000000 }

var qosOrder = map[corev1.PodQOSClass]int{corev1.PodQOSBestEffort: 0, corev1.PodQOSBurstable: 1, corev1.PodQOSGuaranteed: 2}

// Rank sorts candidates in eviction order for resource r, stably. Pods
// without stats come first, as in the kubelet. For pids only priority
// (then process count) matters: pods have no pid requests.
func Rank(cs []Candidate, r corev1.ResourceName, by Ranking) {
	sort.SliceStable(cs, func(i, j int) bool {
		a, b := cs[i], cs[j]
		if a.HasStats != b.HasStats {
			return !a.HasStats
		}
		if by == RankQoS {
			if qa, qb := qosOrder[qos.Class(a.Pod)], qosOrder[qos.Class(b.Pod)]; qa != qb {
				return qa < qb
			}
		}
		if r != "pids" {
			if ea, eb := a.Usage > a.Request, b.Usage > b.Request; ea != eb {
				return ea
			}
		}
		if pa, pb := Priority(a.Pod), Priority(b.Pod); pa != pb {
			return pa < pb
		}
		return a.Usage-a.Request > b.Usage-b.Request
	})
}

// Select takes candidates in rank order until their usage covers need: the
// smallest prefix of the ranking that relieves the pressure. If even all of
// them cannot cover it, all are taken.
func Select(ranked []Candidate, need int64) []Candidate {
	var sum int64
	for i, c := range ranked {
		sum += c.Usage
		if sum >= need {
			return ranked[:i+1]
		}
	}
	return ranked
}
