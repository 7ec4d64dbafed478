package qos

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func list(kv ...string) corev1.ResourceList {
	l := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		l[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return l
}

func podLevelPod(pod *corev1.ResourceRequirements, containers ...corev1.ResourceRequirements) *corev1.Pod {
	p := &corev1.Pod{Spec: corev1.PodSpec{Resources: pod}}
	for i, r := range containers {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: string(rune('a' + i)), Resources: r})
	}
	return p
}

// The kubelet 1.37's rules for pods with spec.resources (KEP-2837).
func TestPodLevelResources(t *testing.T) {
	guaranteedPod := &corev1.ResourceRequirements{Requests: list("cpu", "100m", "memory", "100Mi"), Limits: list("cpu", "100m", "memory", "100Mi")}
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want corev1.PodQOSClass
	}{
		{"pod-level req = lim, containers without resources", podLevelPod(guaranteedPod, corev1.ResourceRequirements{}), corev1.PodQOSGuaranteed},
		{"pod-level Guaranteed, a container req < lim", podLevelPod(guaranteedPod, corev1.ResourceRequirements{Requests: list("cpu", "10m"), Limits: list("cpu", "50m")}), corev1.PodQOSGuaranteed},
		{"pod-level requests only", podLevelPod(&corev1.ResourceRequirements{Requests: list("cpu", "100m", "memory", "100Mi")}), corev1.PodQOSBurstable},
		{"pod-level cpu only, req = lim", podLevelPod(&corev1.ResourceRequirements{Requests: list("cpu", "1"), Limits: list("cpu", "1")}), corev1.PodQOSBurstable},
		{"empty spec.resources: the containers decide", podLevelPod(&corev1.ResourceRequirements{},
			corev1.ResourceRequirements{Requests: list("cpu", "1", "memory", "1Gi"), Limits: list("cpu", "1", "memory", "1Gi")}), corev1.PodQOSGuaranteed},
	} {
		if got := Class(tc.pod); got != tc.want {
			t.Errorf("%s: class %s, want %s", tc.name, got, tc.want)
		}
	}

	// Pod-level values replace the containers' per resource; overhead is added.
	p := podLevelPod(&corev1.ResourceRequirements{Requests: list("cpu", "500m"), Limits: list("cpu", "1")},
		corev1.ResourceRequirements{Requests: list("cpu", "100m", "memory", "64Mi"), Limits: list("memory", "128Mi")},
		corev1.ResourceRequirements{Requests: list("cpu", "100m", "memory", "64Mi")})
	p.Spec.Overhead = list("cpu", "10m")
	req, lim := PodRequests(p), PodLimits(p)
	if req.Cpu().MilliValue() != 510 || req.Memory().Value() != 128<<20 || lim.Cpu().MilliValue() != 1010 {
		t.Errorf("requests %v, limits %v", req, lim)
	}
	if !AllHaveLimit(p, corev1.ResourceCPU) || AllHaveLimit(p, corev1.ResourceMemory) {
		t.Error("a pod-level cpu limit limits the pod cgroup; one container's memory limit does not")
	}

	// Burstable: the pod-level memory request beyond the containers' is
	// shared among them for the OOM score.
	b := podLevelPod(&corev1.ResourceRequirements{Requests: list("memory", "300Mi")},
		corev1.ResourceRequirements{Requests: list("memory", "100Mi")}, corev1.ResourceRequirements{})
	const capacity = 1000 << 20
	if got, want := ContainerOOMScoreAdj(b, &b.Spec.Containers[0], capacity, false), 1000-1000*200/1000; got != want {
		t.Errorf("first container: oom_score_adj %d, want %d", got, want)
	}
	if got, want := ContainerOOMScoreAdj(b, &b.Spec.Containers[1], capacity, false), 1000-1000*100/1000; got != want {
		t.Errorf("second container: oom_score_adj %d, want %d", got, want)
	}
}
