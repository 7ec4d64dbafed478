package criconfig

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"nodeagent/cgroups"
)

func overheadPod() *corev1.Pod {
	pod := testPod(corev1.RestartPolicyAlways, "a", "b")
	for i, cpu := range []string{"250m", "500m"} {
		pod.Spec.Containers[i].Resources = corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("64Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("64Mi")},
		}
	}
	pod.Spec.Overhead = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("16Mi")}
	return pod
}

// The sandbox is told the pod's resources without the overhead, and the
// overhead apart as a Guaranteed container's, as the kubelet's
// applySandboxResources.
func TestSandboxResourcesLeaveOutTheOverhead(t *testing.T) {
	b, _ := testBuilder(t, Options{EnforceCPULimits: true, CPUPeriod: 100000})
	pod := overheadPod()
	cfg, err := b.Sandbox(&Plan{Pod: pod, CgroupParent: "/kubepods/poduid1"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	r, o := cfg.Linux.Resources, cfg.Linux.Overhead
	if r.CpuShares != 768 || r.CpuQuota != 75000 || r.CpuPeriod != 100000 || r.MemoryLimitInBytes != 128<<20 {
		t.Errorf("resources %+v, want shares 768, quota 75000, period 100000, memory 128Mi", r)
	}
	if o.CpuShares != 102 || o.CpuQuota != 10000 || o.MemoryLimitInBytes != 16<<20 {
		t.Errorf("overhead %+v, want shares 102, quota 10000, memory 16Mi", o)
	}
	pod.Spec.Overhead = nil
	if o := b.SandboxOverhead(pod); o.CpuShares != 0 || o.MemoryLimitInBytes != 0 {
		t.Errorf("no overhead: %+v", o)
	}
	// Exclusive CPUs: no quota.
	b, _ = testBuilder(t, Options{EnforceCPULimits: true, CPUs: fixedCPUs{exclusive: map[string]string{"b": "1"}}})
	if r := b.SandboxResources(overheadPod()); r.CpuQuota != -1 {
		t.Errorf("quota with exclusive CPUs: %d", r.CpuQuota)
	}
}

// The pod cgroup's values less the overhead; no limit stays none.
func TestWithoutOverhead(t *testing.T) {
	pod := overheadPod()
	shares, quota, period, memory := uint64(870), int64(85000), uint64(100000), int64(144<<20)
	got := WithoutOverhead(&cgroups.ResourceConfig{CPUShares: &shares, CPUQuota: &quota, CPUPeriod: &period, Memory: &memory}, pod)
	if *got.CPUShares != 768 || *got.CPUQuota != 75000 || *got.Memory != 128<<20 {
		t.Errorf("shares %d quota %d memory %d, want 768 75000 128Mi", *got.CPUShares, *got.CPUQuota, *got.Memory)
	}
	if shares != 870 || quota != 85000 {
		t.Error("the input was changed")
	}
	unlimited := int64(-1)
	if got := WithoutOverhead(&cgroups.ResourceConfig{CPUQuota: &unlimited, CPUPeriod: &period}, pod); *got.CPUQuota != -1 {
		t.Errorf("no quota became %d", *got.CPUQuota)
	}
}
