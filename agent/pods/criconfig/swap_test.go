package criconfig

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	"nodeagent/agent/source"
	"nodeagent/internal/qos"
	"nodeagent/manifest"
)

func memoryPod(fromAPI bool, request, limit string) *corev1.Pod {
	pod := testPod(corev1.RestartPolicyAlways, "app")
	c := &pod.Spec.Containers[0]
	c.Resources = corev1.ResourceRequirements{Requests: corev1.ResourceList{}, Limits: corev1.ResourceList{}}
	if request != "" {
		c.Resources.Requests[corev1.ResourceMemory] = resource.MustParse(request)
	}
	if limit != "" {
		c.Resources.Limits[corev1.ResourceMemory] = resource.MustParse(limit)
	}
	if fromAPI {
		pod.Annotations = map[string]string{manifest.AnnotationConfigSource: source.SourceAPI}
	}
	return pod
}

// LimitedSwap gives a Burstable API pod's container its memory request's
// share of the node's swap in memory.swap.max; every other container, and
// every container under NoSwap, gets 0 (the kubelet's
// GetContainerSwapBehavior and calcSwapForBurstablePods).
func TestSwapLimitsAsTheKubelet(t *testing.T) {
	const memory, swap = 8 << 30, 2 << 30
	critical := memoryPod(true, "1Gi", "2Gi")
	critical.Spec.Priority = ptr.To[int32](2_000_000_000)
	for _, tc := range []struct {
		name    string
		limited bool
		pod     *corev1.Pod
		want    string
	}{
		{"burstable, LimitedSwap: request/memory of the swap", true, memoryPod(true, "1Gi", "2Gi"), "268435456"},
		{"request without a limit", true, memoryPod(true, "2Gi", ""), "536870912"},
		{"NoSwap", false, memoryPod(true, "1Gi", "2Gi"), "0"},
		{"guaranteed memory (request = limit)", true, memoryPod(true, "1Gi", "1Gi"), "0"},
		{"no memory request or limit", true, memoryPod(true, "", ""), "0"},
		{"a static pod is critical", true, memoryPod(false, "1Gi", "2Gi"), "0"},
		{"system-critical priority", true, critical, "0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, _ := testBuilder(t, Options{MemoryCapacity: memory, OOMRange: qos.OOMScoreRange{Min: -1000},
				Swap: SwapOptions{Limited: tc.limited, Controller: true, CgroupV2: true, Capacity: swap}})
			r := b.Resources(tc.pod, &tc.pod.Spec.Containers[0])
			if got := r.Unified["memory.swap.max"]; got != tc.want {
				t.Fatalf("memory.swap.max = %q, want %q", got, tc.want)
			}
		})
	}
}

// On cgroup v1 swap is never granted: the memory+swap limit is the memory
// limit where the memsw controller is; without a controller nothing is set.
func TestNoSwapOnCgroupV1(t *testing.T) {
	pod := memoryPod(true, "1Gi", "2Gi")
	b, _ := testBuilder(t, Options{MemoryCapacity: 8 << 30, OOMRange: qos.OOMScoreRange{Min: -1000}, Swap: SwapOptions{Controller: true}})
	r := b.Resources(pod, &pod.Spec.Containers[0])
	if r.MemorySwapLimitInBytes != 2<<30 || r.Unified["memory.swap.max"] != "" {
		t.Fatalf("v1: memsw %d, unified %v; want the memory limit, nothing unified", r.MemorySwapLimitInBytes, r.Unified)
	}
	b, _ = testBuilder(t, Options{MemoryCapacity: 8 << 30, OOMRange: qos.OOMScoreRange{Min: -1000}})
	if r := b.Resources(pod, &pod.Spec.Containers[0]); r.MemorySwapLimitInBytes != 0 || r.Unified != nil {
		t.Fatalf("no swap controller: memsw %d, unified %v", r.MemorySwapLimitInBytes, r.Unified)
	}
}
