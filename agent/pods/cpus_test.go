package pods

import (
	"io"
	"log/slog"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/cpuset"

	"nodeagent/cgroups/cpumanager"
	"nodeagent/cri/critest"
)

func guaranteedCPUs(p *corev1.Pod, cpu string) *corev1.Pod {
	p = p.DeepCopy()
	l := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("64Mi")}
	p.Spec.Containers[0].Resources = corev1.ResourceRequirements{Requests: l, Limits: l}
	return p
}

func staticCPUs(t *testing.T) *cpumanager.Manager {
	t.Helper()
	cpus, err := cpumanager.New(cpumanager.Options{Topology: cpumanager.Uniform(1, 4, 1), Reserved: cpuset.New(0),
		StateFile: filepath.Join(t.TempDir(), "cpu_manager_state"), Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return cpus
}

// Under the static policy a Guaranteed pod's cpu resize is Infeasible in
// the kubelet's words, and its memory resize is not; a Burstable pod's
// cpu resize is admitted as usual.
func TestStaticCPUManagerMakesGuaranteedCPUResizesInfeasible(t *testing.T) {
	m, _ := newTestManager(t, critest.New(), nil)
	m.cpus = staticCPUs(t)
	m.opts.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3"), corev1.ResourceMemory: resource.MustParse("4Gi")}
	pod := guaranteedCPUs(testPod(corev1.RestartPolicyAlways, "a"), "1")
	pod.Generation = 1
	m.mu.Lock()
	defer m.mu.Unlock()
	m.synced = true
	if r := m.admitLocked(pod, nil); r != nil {
		t.Fatalf("admission: %+v", r)
	}
	m.allocateLocked(pod)
	m.pods[pod.UID] = pod
	w := newWorker(m, pod.UID, pod)
	m.workers[pod.UID] = w

	twoCPUs := guaranteedCPUs(pod, "2")
	twoCPUs.Generation = 2
	m.resizeLocked(twoCPUs)
	if c := w.resize.pending; c == nil || c.Reason != corev1.PodReasonInfeasible || c.Message != `Resize is infeasible for Guaranteed Pods alongside CPU Manager policy "static"` {
		t.Fatalf("pending %+v", c)
	}
	moreMemory := pod.DeepCopy()
	moreMemory.Generation = 3
	l := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("128Mi")}
	moreMemory.Spec.Containers[0].Resources = corev1.ResourceRequirements{Requests: l, Limits: l}
	if view := m.resizeLocked(moreMemory); view != moreMemory || w.resize.pending != nil {
		t.Fatalf("a memory resize under the static policy: pending %+v", w.resize.pending)
	}
}

// A Guaranteed pod whose whole CPUs are not free is refused before the
// resource predicate, as the kubelet's topology manager handler does.
func TestStaticCPUManagerRefusesWhatItCannotPin(t *testing.T) {
	m, _ := newTestManager(t, critest.New(), nil)
	m.cpus = staticCPUs(t)
	// Allocatable is short too: the CPU manager's refusal comes first.
	m.opts.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3"), corev1.ResourceMemory: resource.MustParse("4Gi")}
	pod := guaranteedCPUs(testPod(corev1.RestartPolicyAlways, "a"), "4")
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.admitLocked(pod, nil)
	if r == nil || r.Reason != "UnexpectedAdmissionError" ||
		r.Message != "Allocate failed due to not enough cpus available to satisfy request: requested=4, available=3, which is unexpected" {
		t.Fatalf("rejection %+v", r)
	}
	if r := m.admitLocked(guaranteedCPUs(pod, "3"), nil); r != nil || m.cpus.(*cpumanager.Manager).Shared().String() != "0" {
		t.Fatalf("3 of 3 free CPUs: %+v, shared pool %s", r, m.cpus.(*cpumanager.Manager).Shared())
	}
}

// Under full-pcpus-only a request that is not a multiple of the threads per
// core is refused with the kubelet's reason, SMTAlignmentError, which the
// upstream specs match the pod's status reason against.
func TestFullPCPUsOnlyRefusalIsAnSMTAlignmentError(t *testing.T) {
	m, _ := newTestManager(t, critest.New(), nil)
	cpus, err := cpumanager.New(cpumanager.Options{Topology: cpumanager.Uniform(1, 2, 2), Reserved: cpuset.New(0), FullPhysicalCPUsOnly: true,
		StateFile: filepath.Join(t.TempDir(), "cpu_manager_state"), Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	m.cpus = cpus
	m.opts.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3"), corev1.ResourceMemory: resource.MustParse("4Gi")}
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.admitLocked(guaranteedCPUs(testPod(corev1.RestartPolicyAlways, "a"), "1"), nil)
	if r == nil || r.Reason != "SMTAlignmentError" || r.Message != "SMT Alignment Error: requested 1 cpus not multiple cpus per core = 2" {
		t.Fatalf("rejection %+v", r)
	}
}
