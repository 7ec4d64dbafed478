package qos

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// res builds a ResourceList from "cpu=100m,memory=64Mi"-style pairs.
func res(pairs ...string) corev1.ResourceList {
	l := corev1.ResourceList{}
	for i := 0; i+1 < len(pairs); i += 2 {
		l[corev1.ResourceName(pairs[i])] = resource.MustParse(pairs[i+1])
	}
	return l
}

func ctr(name string, req, lim corev1.ResourceList) corev1.Container {
	return corev1.Container{Name: name, Resources: corev1.ResourceRequirements{Requests: req, Limits: lim}}
}

func podOf(init []corev1.Container, containers ...corev1.Container) *corev1.Pod {
	return &corev1.Pod{Spec: corev1.PodSpec{InitContainers: init, Containers: containers}}
}

var always = corev1.ContainerRestartPolicyAlways

func TestClass(t *testing.T) {
	guaranteed := ctr("g", res("cpu", "1", "memory", "1Gi"), res("cpu", "1", "memory", "1Gi"))
	cases := []struct {
		name string
		pod  *corev1.Pod
		want corev1.PodQOSClass
	}{
		{"no resources", podOf(nil, ctr("a", nil, nil)), corev1.PodQOSBestEffort},
		{"only ephemeral storage is still best effort", podOf(nil, ctr("a", res("ephemeral-storage", "1Gi"), nil)), corev1.PodQOSBestEffort},
		{"zero requests are best effort", podOf(nil, ctr("a", res("cpu", "0"), nil)), corev1.PodQOSBestEffort},
		{"requests equal limits", podOf(nil, guaranteed), corev1.PodQOSGuaranteed},
		{"two guaranteed containers", podOf(nil, guaranteed, guaranteed), corev1.PodQOSGuaranteed},
		{"cpu request only", podOf(nil, ctr("a", res("cpu", "100m"), nil)), corev1.PodQOSBurstable},
		{"requests below limits", podOf(nil, ctr("a", res("cpu", "100m", "memory", "64Mi"), res("cpu", "1", "memory", "1Gi"))), corev1.PodQOSBurstable},
		{"memory limit missing", podOf(nil, ctr("a", res("cpu", "1"), res("cpu", "1"))), corev1.PodQOSBurstable},
		{"one container without resources", podOf(nil, guaranteed, ctr("b", nil, nil)), corev1.PodQOSBurstable},
		{"init container without limits", podOf([]corev1.Container{ctr("i", nil, nil)}, guaranteed), corev1.PodQOSBurstable},
		{"guaranteed init container", podOf([]corev1.Container{guaranteed}, guaranteed), corev1.PodQOSGuaranteed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := Class(tc.pod); got != tc.want {
				t.Errorf("Class = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestPodRequests(t *testing.T) {
	sidecar := ctr("s", res("cpu", "200m", "memory", "100Mi"), nil)
	sidecar.RestartPolicy = &always
	cases := []struct {
		name       string
		pod        *corev1.Pod
		cpu, memMi int64 // milli-CPU, MiB
	}{
		{"sum of containers", podOf(nil, ctr("a", res("cpu", "100m", "memory", "10Mi"), nil), ctr("b", res("cpu", "250m", "memory", "20Mi"), nil)), 350, 30},
		{"init container larger than app", podOf([]corev1.Container{ctr("i", res("cpu", "2", "memory", "1Mi"), nil)}, ctr("a", res("cpu", "100m", "memory", "10Mi"), nil)), 2000, 10},
		{"sidecar adds to app and to later init", podOf([]corev1.Container{sidecar, ctr("i", res("cpu", "1"), nil)}, ctr("a", res("cpu", "100m", "memory", "10Mi"), nil)), 1200, 110},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := PodRequests(tc.pod)
			if c := got.Cpu().MilliValue(); c != tc.cpu {
				t.Errorf("cpu = %dm, want %dm", c, tc.cpu)
			}
			if m := got.Memory().Value() >> 20; m != tc.memMi {
				t.Errorf("memory = %dMi, want %dMi", m, tc.memMi)
			}
		})
	}
	overhead := podOf(nil, ctr("a", res("cpu", "100m"), nil))
	overhead.Spec.Overhead = res("cpu", "50m")
	if r := PodRequests(overhead); r.Cpu().MilliValue() != 150 {
		c := r.Cpu().MilliValue()
		t.Errorf("with overhead: cpu = %dm, want 150m", c)
	}
}

func TestAllHaveLimit(t *testing.T) {
	p := podOf([]corev1.Container{ctr("i", nil, res("memory", "1Mi"))}, ctr("a", nil, res("memory", "1Mi", "cpu", "1")))
	if !AllHaveLimit(p, corev1.ResourceMemory) {
		t.Error("memory: every container has a limit")
	}
	if AllHaveLimit(p, corev1.ResourceCPU) {
		t.Error("cpu: the init container has none")
	}
}

func TestContainerOOMScoreAdj(t *testing.T) {
	const capacity = 16 << 30 // the reference's worked examples are for 16 GiB
	burstable := func(mem string) *corev1.Pod {
		r := res("cpu", "100m")
		if mem != "" {
			r = res("cpu", "100m", "memory", mem)
		}
		return podOf(nil, ctr("a", r, nil))
	}
	guaranteed := podOf(nil, ctr("a", res("cpu", "1", "memory", "1Gi"), res("cpu", "1", "memory", "1Gi")))
	cases := []struct {
		name string
		pod  *corev1.Pod
		want int
	}{
		{"guaranteed", guaranteed, -997},
		{"best effort", podOf(nil, ctr("a", nil, nil)), 1000},
		{"burstable without memory request", burstable(""), 999},
		{"burstable 100Mi", burstable("100Mi"), 994},
		{"burstable 1Gi", burstable("1Gi"), 938},
		{"burstable 4Gi", burstable("4Gi"), 750},
		{"burstable at capacity", burstable("16Gi"), 3},
		{"burstable above capacity", burstable("32Gi"), 3},
		// 1000*request wraps int64 from 9.2 PB; such a request is still the top.
		{"burstable with a request beyond 1000*request", burstable("9223372036854775807"), 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := ContainerOOMScoreAdj(tc.pod, &tc.pod.Spec.Containers[0], capacity, false); got != tc.want {
				t.Errorf("adj = %d, want %d", got, tc.want)
			}
		})
	}

	t.Run("node-critical static pod", func(t *testing.T) {
		p := burstable("100Mi")
		p.Spec.PriorityClassName = SystemNodeCritical
		if got := ContainerOOMScoreAdj(p, &p.Spec.Containers[0], capacity, true); got != -997 {
			t.Errorf("adj = %d, want -997", got)
		}
		if got := ContainerOOMScoreAdj(p, &p.Spec.Containers[0], capacity, false); got != 994 {
			t.Errorf("not critical: adj = %d, want 994", got)
		}
	})
	t.Run("sidecar never above smallest regular container", func(t *testing.T) {
		sc := ctr("s", res("cpu", "100m", "memory", "10Mi"), nil)
		sc.RestartPolicy = &always
		p := podOf([]corev1.Container{sc}, ctr("a", res("memory", "1Gi"), nil))
		if got := ContainerOOMScoreAdj(p, &p.Spec.InitContainers[0], capacity, false); got != 938 {
			t.Errorf("sidecar adj = %d, want 938 (that of the 1Gi regular container)", got)
		}
	})
}

func TestOOMScoreRangeMap(t *testing.T) {
	if got := Unrestricted.Map(-997); got != -997 {
		t.Errorf("unrestricted keeps -997, got %d", got)
	}
	zero := OOMScoreRange{Min: 0}
	for _, tc := range []struct{ in, want int }{{-997, 0}, {3, 3}, {500, 500}, {999, 999}, {1000, 1000}} {
		if got := zero.Map(tc.in); got != tc.want {
			t.Errorf("min 0: Map(%d) = %d, want %d", tc.in, got, tc.want)
		}
	}
	// A floor inside the Burstable band squeezes it but keeps the order.
	high := OOMScoreRange{Min: 500}
	prev := high.Map(-997)
	if prev != 500 {
		t.Errorf("min 500: Map(-997) = %d, want 500", prev)
	}
	for adj := 3; adj <= 1000; adj++ {
		got := high.Map(adj)
		if got < prev || got <= 500 || got > 1000 {
			t.Fatalf("min 500: Map(%d) = %d breaks the order after %d", adj, got, prev)
		}
		prev = got
	}
	if high.Map(999) >= high.Map(1000) {
		t.Error("min 500: Burstable must stay below BestEffort")
	}
}
