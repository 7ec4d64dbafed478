package criconfig

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/cpuset"

	"nodeagent/internal/qos"
)

type fixedCPUs struct{ exclusive map[string]string }

func (f fixedCPUs) CPUs(_ types.UID, container string) (cpuset.CPUSet, bool) {
	if s, ok := f.exclusive[container]; ok {
		set, _ := cpuset.Parse(s)
		return set, true
	}
	return cpuset.New(0, 3), false
}

// Under the static CPU manager a container is created on its CPUs: its
// own without a CFS quota, or the shared pool with its quota.
func TestContainersRunOnTheirCPUs(t *testing.T) {
	b, _ := testBuilder(t, Options{MemoryCapacity: 8 << 30, OOMRange: qos.OOMScoreRange{Min: -1000}, EnforceCPULimits: true, CPUPeriod: 100000,
		CPUs: fixedCPUs{exclusive: map[string]string{"pinned": "1-2"}}})
	pod := testPod(corev1.RestartPolicyAlways, "pinned", "shared")
	for i := range pod.Spec.Containers {
		l := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("64Mi")}
		pod.Spec.Containers[i].Resources = corev1.ResourceRequirements{Requests: l, Limits: l}
	}
	if r := b.Resources(pod, &pod.Spec.Containers[0]); r.CpusetCpus != "1-2" || r.CpuQuota != -1 {
		t.Errorf("exclusive container: cpuset %q quota %d, want 1-2 and -1", r.CpusetCpus, r.CpuQuota)
	}
	if r := b.Resources(pod, &pod.Spec.Containers[1]); r.CpusetCpus != "0,3" || r.CpuQuota != 200000 {
		t.Errorf("shared container: cpuset %q quota %d, want 0,3 and 200000", r.CpusetCpus, r.CpuQuota)
	}
}
