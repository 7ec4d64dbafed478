package allocation

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
)

func requirements(cpuReq, memLimit string) corev1.ResourceRequirements {
	r := corev1.ResourceRequirements{Requests: corev1.ResourceList{}, Limits: corev1.ResourceList{}}
	if cpuReq != "" {
		r.Requests[corev1.ResourceCPU] = resource.MustParse(cpuReq)
	}
	if memLimit != "" {
		r.Limits[corev1.ResourceMemory] = resource.MustParse(memLimit)
	}
	return r
}

func testPod() *corev1.Pod {
	return &corev1.Pod{Spec: corev1.PodSpec{
		InitContainers: []corev1.Container{{Name: "init", Resources: requirements("100m", "")}},
		Containers:     []corev1.Container{{Name: "main", Resources: requirements("500m", "64Mi")}},
	}}
}

func TestOfTakesEveryContainerAndThePodLevel(t *testing.T) {
	pod := testPod()
	pl := requirements("1", "128Mi")
	pod.Spec.Resources = &pl
	r := Of(pod)
	if len(r.Containers) != 2 || r.Pod == nil {
		t.Fatalf("got %+v, want init, main and the pod level", r)
	}
	// A copy: changing the spec later does not change what was admitted.
	pod.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("2")
	if q := r.Containers["main"].Requests[corev1.ResourceCPU]; q.String() != "500m" {
		t.Fatalf("the admitted request followed the spec to %s", q.String())
	}
}

func TestEqualComparesValuesOfCPUAndMemory(t *testing.T) {
	a := Of(testPod())
	b := Of(testPod())
	b.Containers["main"] = requirements("0.5", "67108864")
	if !a.Equal(b) {
		t.Fatal("500m/64Mi and 0.5/67108864 differ")
	}
	b.Containers["main"] = requirements("600m", "64Mi")
	if a.Equal(b) {
		t.Fatal("a changed CPU request is equal")
	}
	c := Of(testPod())
	delete(c.Containers["main"].Limits, corev1.ResourceMemory)
	if a.Equal(c) {
		t.Fatal("a removed memory limit is equal")
	}
	d := Of(testPod())
	pl := requirements("1", "")
	d.Pod = &pl
	if a.Equal(d) {
		t.Fatal("added pod-level resources are equal")
	}
}

func TestApplyRunsTheAllocatedResources(t *testing.T) {
	pod := testPod()
	r := Of(pod)
	r.Containers["main"] = requirements("250m", "32Mi")
	got := r.Apply(pod)
	if q := got.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU]; q.String() != "250m" {
		t.Fatalf("the applied pod asks for %s, want 250m", q.String())
	}
	if q := pod.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU]; q.String() != "500m" {
		t.Fatalf("Apply changed its input to %s", q.String())
	}
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func TestStoreSurvivesAReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "allocated")
	s := Open(path, quiet())
	r := Of(testPod())
	if err := s.Set("uid-1", r); err != nil {
		t.Fatal(err)
	}
	if err := s.Set("uid-2", r); err != nil {
		t.Fatal(err)
	}
	if err := s.Retain(func(uid types.UID) bool { return uid == "uid-1" }); err != nil {
		t.Fatal(err)
	}
	again := Open(path, quiet())
	got, ok := again.Get("uid-1")
	if !ok || !got.Equal(r) {
		t.Fatalf("reopened: %+v, %v; want %+v", got, ok, r)
	}
	if _, ok := again.Get("uid-2"); ok {
		t.Fatal("a pod Retain dropped came back")
	}
}

func TestACorruptCheckpointIsLoggedAndStartsEmpty(t *testing.T) {
	path := filepath.Join(t.TempDir(), "allocated")
	s := Open(path, quiet())
	if err := s.Set("uid-1", Of(testPod())); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// An edit that keeps the JSON valid: only the checksum notices.
	if err := os.WriteFile(path, []byte(strings.Replace(string(b), "500m", "900m", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	again := Open(path, slog.New(slog.NewTextHandler(&log, nil)))
	if _, ok := again.Get("uid-1"); ok {
		t.Fatal("an entry of a file whose checksum fails was taken")
	}
	if !strings.Contains(log.String(), path) || !strings.Contains(log.String(), "checksum") {
		t.Fatalf("the log does not name the file and the checksum: %s", log.String())
	}
	// And the store works on: the next write replaces the file.
	if err := again.Set("uid-2", Of(testPod())); err != nil {
		t.Fatal(err)
	}
	if _, ok := Open(path, quiet()).Get("uid-2"); !ok {
		t.Fatal("the rewritten checkpoint does not read back")
	}
}

// A checkpoint as a 1.37 kubelet writes it (its checksum taken with the
// kubelet's hash dump, go-spew) reads back, and ours has its layout: a
// node can go from one agent to the other on the same root directory (the
// kubelet panics on a checkpoint it cannot read).
func TestCheckpointIsTheKubelets(t *testing.T) {
	path := filepath.Join(t.TempDir(), "allocated_pods_state")
	data := `{"entries":{"uid-k":{"ContainerResources":{"app":{"limits":{"memory":"128Mi"},"requests":{"cpu":"250m","memory":"64Mi"}}},"PodLevelResources":null,"EmptyDirVolumeLimits":null}}}`
	kubelets := fmt.Sprintf(`{"data":%q,"checksum":973422491}`, data)
	if err := os.WriteFile(path, []byte(kubelets), 0o600); err != nil {
		t.Fatal(err)
	}
	got, ok := Open(path, quiet()).Get("uid-k")
	app := got.Containers["app"]
	if !ok || app.Requests.Cpu().String() != "250m" || app.Limits.Memory().String() != "128Mi" || got.Pod != nil {
		t.Fatalf("the kubelet's checkpoint: %+v, %v", got, ok)
	}
	s := Open(filepath.Join(t.TempDir(), "ours"), quiet())
	if err := s.Set("uid-k", got); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(s.path)
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Data     string `json:"data"`
		Checksum uint64 `json:"checksum"`
	}
	if err := json.Unmarshal(b, &f); err != nil || !strings.Contains(f.Data, `"ContainerResources":{"app":`) || f.Checksum != checksum(f.Data) {
		t.Fatalf("ours is not in the kubelet's layout (%v): %s", err, b)
	}
}
