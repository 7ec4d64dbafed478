//go:build integration

package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
)

// resizeTo patches a pod's containers' resources through the resize
// subresource, as `kubectl patch --subresource resize` does.
func (cp *controlPlane) resizeTo(t *testing.T, name string, containers map[string]corev1.ResourceRequirements) *corev1.Pod {
	t.Helper()
	var list []map[string]any
	for c, r := range containers {
		list = append(list, map[string]any{"name": c, "resources": r})
	}
	patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"containers": list}})
	p, err := cp.Client.CoreV1().Pods("default").Patch(context.Background(), name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "resize")
	if err != nil {
		t.Fatalf("resize %s: %v", name, err)
	}
	return p
}

func resources(cpuReq, cpuLim, memReq, memLim string) corev1.ResourceRequirements {
	r := corev1.ResourceRequirements{Requests: corev1.ResourceList{}, Limits: corev1.ResourceList{}}
	for _, v := range []struct {
		list  corev1.ResourceList
		name  corev1.ResourceName
		value string
	}{{r.Requests, corev1.ResourceCPU, cpuReq}, {r.Limits, corev1.ResourceCPU, cpuLim}, {r.Requests, corev1.ResourceMemory, memReq}, {r.Limits, corev1.ResourceMemory, memLim}} {
		if v.value != "" {
			v.list[v.name] = resource.MustParse(v.value)
		}
	}
	return r
}

func podCondition(p *corev1.Pod, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == t {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// resized is the check of a resize done: the status observed the
// generation, no resize condition is left, and the container's status
// resources are what was asked.
func resized(generation int64, want corev1.ResourceRequirements) func(p *corev1.Pod) error {
	return func(p *corev1.Pod) error {
		if p.Status.ObservedGeneration < generation {
			return fmt.Errorf("observedGeneration %d < %d", p.Status.ObservedGeneration, generation)
		}
		for _, t := range []corev1.PodConditionType{corev1.PodResizePending, corev1.PodResizeInProgress} {
			if c := podCondition(p, t); c != nil {
				return fmt.Errorf("%s: %s %s", t, c.Reason, c.Message)
			}
		}
		if len(p.Status.ContainerStatuses) != 1 || p.Status.ContainerStatuses[0].Resources == nil {
			return fmt.Errorf("container statuses without resources: %+v", p.Status.ContainerStatuses)
		}
		cs := p.Status.ContainerStatuses[0]
		if !sameResources(*cs.Resources, want) {
			return fmt.Errorf("status resources %v, want %v", cs.Resources, want)
		}
		if !sameList(cs.AllocatedResources, want.Requests) {
			return fmt.Errorf("allocatedResources %v, want %v", cs.AllocatedResources, want.Requests)
		}
		return nil
	}
}

func sameResources(a, b corev1.ResourceRequirements) bool {
	return sameList(a.Requests, b.Requests) && sameList(a.Limits, b.Limits)
}

func sameList(a, b corev1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for k, q := range a {
		if o, ok := b[k]; !ok || o.Cmp(q) != 0 {
			return false
		}
	}
	return true
}

// checkResizedCgroups compares the container's and the pod's cgroups
// with a Burstable pod's one container whose every resource is limited.
func checkResizedCgroups(t *testing.T, n *node, p *corev1.Pod, r corev1.ResourceRequirements) {
	t.Helper()
	pod := n.cgroupRoot + "/kubepods/burstable/pod" + string(p.UID)
	id := strings.TrimPrefix(p.Status.ContainerStatuses[0].ContainerID, "containerd://")
	quota := r.Limits.Cpu().MilliValue() * 100
	shares := uint64(r.Requests.Cpu().MilliValue() * 1024 / 1000)
	for _, dir := range []string{pod + "/" + id, pod} {
		v := cgroupValues(t, dir)
		if v.CPUQuota != quota || cpuWeight(v) != wantCPUWeight(t, shares) || v.MemoryLimit != r.Limits.Memory().Value() {
			t.Errorf("cgroup %s: quota %d, weight %d, memory limit %d; want %d, %d, %d", dir, v.CPUQuota, cpuWeight(v), v.MemoryLimit,
				quota, wantCPUWeight(t, shares), r.Limits.Memory().Value())
		}
	}
}

// A running pod resized through the API: its container's and its pod's
// cgroups change without a restart and the status says so; a memory
// limit below what the container uses is refused with the kubelet's
// Error and applied once the use drops.
func TestClusterResizeInPlace(t *testing.T) {
	n, cp := clusterNode(t, "")
	n.start()
	ctx := context.Background()
	drop := t.TempDir()
	start := resources("100m", "200m", "128Mi", "192Mi")
	pod := apiPod("resize-"+randomHex(3), n.name, func(p *corev1.Pod) {
		p.Spec.Volumes = []corev1.Volume{{Name: "drop", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: drop}}}}
		c := &p.Spec.Containers[0]
		c.VolumeMounts = []corev1.VolumeMount{{Name: "drop", MountPath: "/drop"}}
		// 96 MiB held until the test drops it.
		c.Command = []string{"sh", "-c", "trap 'exit 0' TERM; memhog --mb 96 --rate 0 & hog=$!; " +
			"while [ ! -e /drop/now ]; do sleep 0.2; done; kill $hog; while true; do sleep 0.2; done"}
		c.Resources = start
	})
	if _, err := cp.Client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	running := cp.waitAPIPod(t, "default", pod.Name, time.Minute, "Running with its resources in the status", func(p *corev1.Pod) error {
		if p.Status.Phase != corev1.PodRunning {
			return fmt.Errorf("phase %s", p.Status.Phase)
		}
		return resized(p.Generation, start)(p)
	})
	checkResizedCgroups(t, n, running, start)
	// The memhog holds its 96 MiB before the decrease is asked.
	podCgroup := n.cgroupRoot + "/kubepods/burstable/pod" + string(running.UID)
	n.eventually("the container holds 96 MiB", 30*time.Second, func() error {
		if u := cgroupMemory(t, podCgroup).Usage; u < 96<<20 {
			return fmt.Errorf("pod memory usage %d", u)
		}
		return nil
	})

	// Up: both CPU values and the memory limit.
	up := resources("150m", "300m", "128Mi", "256Mi")
	patched := cp.resizeTo(t, pod.Name, map[string]corev1.ResourceRequirements{"main": up})
	done := cp.waitAPIPod(t, "default", pod.Name, 30*time.Second, "resized up", resized(patched.Generation, up))
	checkResizedCgroups(t, n, done, up)
	if cs := done.Status.ContainerStatuses[0]; cs.RestartCount != 0 || cs.ContainerID != running.Status.ContainerStatuses[0].ContainerID {
		t.Errorf("the container was restarted: %+v", cs)
	}
	// The status stays so across the relists and syncs that follow.
	time.Sleep(3 * time.Second)
	if later, err := cp.Client.CoreV1().Pods("default").Get(ctx, pod.Name, metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	} else if err := resized(patched.Generation, up)(later); err != nil {
		t.Errorf("3 s after the resize: %v", err)
	}

	// Down below use: refused, nothing applied.
	down := resources("150m", "300m", "64Mi", "64Mi")
	patched = cp.resizeTo(t, pod.Name, map[string]corev1.ResourceRequirements{"main": down})
	errMsg := regexp.MustCompile(`memory limit \(\d+\) below current usage`)
	cp.waitAPIPod(t, "default", pod.Name, 30*time.Second, "PodResizeInProgress with reason Error", func(p *corev1.Pod) error {
		c := podCondition(p, corev1.PodResizeInProgress)
		if c == nil || c.Reason != corev1.PodReasonError || !errMsg.MatchString(c.Message) {
			return fmt.Errorf("PodResizeInProgress %+v", c)
		}
		if podCondition(p, corev1.PodResizePending) != nil {
			return fmt.Errorf("PodResizePending set too")
		}
		return nil
	})
	checkResizedCgroups(t, n, done, up)

	// The use drops: the decrease goes through at a retry.
	if err := os.WriteFile(filepath.Join(drop, "now"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	done = cp.waitAPIPod(t, "default", pod.Name, 30*time.Second, "resized down", resized(patched.Generation, down))
	checkResizedCgroups(t, n, done, down)
	if cs := done.Status.ContainerStatuses[0]; cs.RestartCount != 0 {
		t.Errorf("restart count %d", cs.RestartCount)
	}

	evs, err := cp.Client.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("involvedObject.uid", string(running.UID)).String()})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, e := range evs.Items {
		seen[e.Reason]++
		if strings.HasPrefix(e.Reason, "Resize") && !strings.HasPrefix(e.Message, "Pod resize ") {
			t.Errorf("event %s: %q", e.Reason, e.Message)
		}
	}
	if seen["ResizeStarted"] < 2 || seen["ResizeCompleted"] < 2 || seen["ResizeError"] < 1 {
		t.Errorf("resize events %v", seen)
	}
}

// A resize that does not fit beside the other pods waits as Deferred, and
// is applied once another pod goes; RestartContainer restarts the
// container with its new resources.
func TestClusterResizeDeferredThenAppliedAndRestartPolicy(t *testing.T) {
	n, cp := clusterNode(t, "")
	n.start()
	ctx := context.Background()
	node := n.nodeObject()
	allocatable := node.Status.Allocatable.Cpu().MilliValue()
	holder := apiPod("holder-"+randomHex(3), n.name, func(p *corev1.Pod) {
		p.Spec.Containers[0].Resources = resources("500m", "", "", "")
	})
	start := resources("100m", "200m", "32Mi", "64Mi")
	pod := apiPod("grow-"+randomHex(3), n.name, func(p *corev1.Pod) {
		c := &p.Spec.Containers[0]
		c.Resources = start
		c.ResizePolicy = []corev1.ContainerResizePolicy{{ResourceName: corev1.ResourceMemory, RestartPolicy: corev1.RestartContainer}}
	})
	for _, p := range []*corev1.Pod{holder, pod} {
		if _, err := cp.Client.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		cp.waitAPIPod(t, "default", p.Name, time.Minute, "Running", func(p *corev1.Pod) error {
			if p.Status.Phase != corev1.PodRunning {
				return fmt.Errorf("phase %s", p.Status.Phase)
			}
			return nil
		})
	}
	// More than is left beside the holder, less than allocatable.
	big := resources(fmt.Sprintf("%dm", allocatable-200), fmt.Sprintf("%dm", allocatable-100), "32Mi", "64Mi")
	patched := cp.resizeTo(t, pod.Name, map[string]corev1.ResourceRequirements{"main": big})
	cp.waitAPIPod(t, "default", pod.Name, 30*time.Second, "PodResizePending Deferred", func(p *corev1.Pod) error {
		c := podCondition(p, corev1.PodResizePending)
		if c == nil || c.Reason != corev1.PodReasonDeferred || !strings.Contains(c.Message, "Node didn't have enough resource: cpu") || c.ObservedGeneration != patched.Generation {
			return fmt.Errorf("PodResizePending %+v", c)
		}
		return nil
	})
	if err := cp.Client.CoreV1().Pods("default").Delete(ctx, holder.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// The reconcile retries it within a minute, the holder's removal at once.
	done := cp.waitAPIPod(t, "default", pod.Name, 90*time.Second, "resized once the holder went", resized(patched.Generation, big))
	if rc := done.Status.ContainerStatuses[0].RestartCount; rc != 0 {
		t.Errorf("a CPU resize restarted the container (restart count %d)", rc)
	}

	// Memory restarts it (resizePolicy RestartContainer), once.
	mem := resources(fmt.Sprintf("%dm", allocatable-200), fmt.Sprintf("%dm", allocatable-100), "48Mi", "96Mi")
	patched = cp.resizeTo(t, pod.Name, map[string]corev1.ResourceRequirements{"main": mem})
	done = cp.waitAPIPod(t, "default", pod.Name, 60*time.Second, "restarted with its new memory", func(p *corev1.Pod) error {
		if err := resized(patched.Generation, mem)(p); err != nil {
			return err
		}
		if cs := p.Status.ContainerStatuses[0]; cs.RestartCount != 1 || cs.State.Running == nil {
			return fmt.Errorf("restart count %d, state %+v", cs.RestartCount, cs.State)
		}
		return nil
	})
	checkResizedCgroups(t, n, done, mem)
}

// A resize asked while the agent is down (killed) is applied when it is
// back: the checkpoint says what the running container was given.
func TestClusterResizeAcrossAgentKill(t *testing.T) {
	n, cp := clusterNode(t, "")
	n.start()
	ctx := context.Background()
	start := resources("100m", "200m", "32Mi", "64Mi")
	pod := apiPod("survive-"+randomHex(3), n.name, func(p *corev1.Pod) { p.Spec.Containers[0].Resources = start })
	if _, err := cp.Client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	running := cp.waitAPIPod(t, "default", pod.Name, time.Minute, "Running", func(p *corev1.Pod) error {
		if p.Status.Phase != corev1.PodRunning {
			return fmt.Errorf("phase %s", p.Status.Phase)
		}
		return resized(p.Generation, start)(p)
	})
	n.kill()
	up := resources("200m", "400m", "32Mi", "128Mi")
	patched := cp.resizeTo(t, pod.Name, map[string]corev1.ResourceRequirements{"main": up})
	n.start()
	done := cp.waitAPIPod(t, "default", pod.Name, 60*time.Second, "resized after the restart", resized(patched.Generation, up))
	checkResizedCgroups(t, n, done, up)
	if cs := done.Status.ContainerStatuses[0]; cs.RestartCount != 0 || cs.ContainerID != running.Status.ContainerStatuses[0].ContainerID {
		t.Errorf("the container was restarted: %+v", cs)
	}
	b, err := os.ReadFile(filepath.Join(n.agent.RootDir, "allocated_pods_state"))
	if err != nil || !strings.Contains(string(b), string(running.UID)) {
		t.Errorf("allocation checkpoint: %v\n%s", err, b)
	}
}

// Pod-level resources (spec.resources): the class, the pod cgroup and the
// limits of containers without their own come from them; the status
// reports them; a pod-level resize moves the pod cgroup and those
// containers' limits without a restart.
func TestClusterPodLevelResources(t *testing.T) {
	n, cp := clusterNode(t, "")
	n.start()
	ctx := context.Background()
	if !slices.Contains(n.nodeObject().Status.DeclaredFeatures, "InPlacePodLevelResourcesVerticalScaling") {
		t.Errorf("declared features %v", n.nodeObject().Status.DeclaredFeatures)
	}
	podLevel := resources("100m", "200m", "64Mi", "128Mi")
	pod := apiPod("plr-"+randomHex(3), n.name, func(p *corev1.Pod) {
		p.Spec.Resources = &podLevel
		side := p.Spec.Containers[0]
		side.Name = "side"
		side.Resources = corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("32Mi")}}
		p.Spec.Containers = append(p.Spec.Containers, side)
	})
	if _, err := cp.Client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	podStatus := func(want corev1.ResourceRequirements) func(p *corev1.Pod) error {
		return func(p *corev1.Pod) error {
			if p.Status.Phase != corev1.PodRunning || p.Status.ObservedGeneration < p.Generation {
				return fmt.Errorf("phase %s, observed generation %d of %d", p.Status.Phase, p.Status.ObservedGeneration, p.Generation)
			}
			for _, t := range []corev1.PodConditionType{corev1.PodResizePending, corev1.PodResizeInProgress} {
				if c := podCondition(p, t); c != nil {
					return fmt.Errorf("%s: %s %s", t, c.Reason, c.Message)
				}
			}
			if p.Status.Resources == nil || !sameResources(*p.Status.Resources, want) || !sameList(p.Status.AllocatedResources, want.Requests) {
				return fmt.Errorf("pod-level status resources %v, allocated %v; want %v", p.Status.Resources, p.Status.AllocatedResources, want)
			}
			return nil
		}
	}
	running := cp.waitAPIPod(t, "default", pod.Name, time.Minute, "Running with pod-level status", podStatus(podLevel))
	if running.Status.QOSClass != corev1.PodQOSBurstable {
		t.Errorf("QoS class %s, want Burstable", running.Status.QOSClass)
	}
	check := func(p *corev1.Pod, r corev1.ResourceRequirements) {
		t.Helper()
		dir := n.cgroupRoot + "/kubepods/burstable/pod" + string(p.UID)
		quota, memory := r.Limits.Cpu().MilliValue()*100, r.Limits.Memory().Value()
		v := cgroupValues(t, dir)
		if v.CPUQuota != quota || v.MemoryLimit != memory || cpuWeight(v) != wantCPUWeight(t, uint64(r.Requests.Cpu().MilliValue()*1024/1000)) {
			t.Errorf("pod cgroup: quota %d, memory %d, weight %d; want %d, %d from %v", v.CPUQuota, v.MemoryLimit, cpuWeight(v), quota, memory, r)
		}
		// main has no resources of its own: the pod's limits are its own.
		for _, cs := range p.Status.ContainerStatuses {
			id := strings.TrimPrefix(cs.ContainerID, "containerd://")
			if c := cgroupValues(t, dir+"/"+id); c.CPUQuota != quota || c.MemoryLimit != memory {
				t.Errorf("container %s: quota %d, memory %d; want the pod's %d, %d", cs.Name, c.CPUQuota, c.MemoryLimit, quota, memory)
			}
		}
	}
	check(running, podLevel)

	up := resources("150m", "300m", "96Mi", "192Mi")
	patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"resources": up}})
	patched, err := cp.Client.CoreV1().Pods("default").Patch(ctx, pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "resize")
	if err != nil {
		t.Fatalf("pod-level resize: %v", err)
	}
	done := cp.waitAPIPod(t, "default", pod.Name, 30*time.Second, "resized at pod level", func(p *corev1.Pod) error {
		if p.Status.ObservedGeneration < patched.Generation {
			return fmt.Errorf("observed generation %d of %d", p.Status.ObservedGeneration, patched.Generation)
		}
		return podStatus(up)(p)
	})
	check(done, up)
	for i, cs := range done.Status.ContainerStatuses {
		if cs.RestartCount != 0 || cs.ContainerID != running.Status.ContainerStatuses[i].ContainerID {
			t.Errorf("container %s restarted: %+v", cs.Name, cs)
		}
	}
}
