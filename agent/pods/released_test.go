package pods

import (
	"context"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"nodeagent/agent/pleg"
	"nodeagent/agent/source"
	"nodeagent/agent/status"
	"nodeagent/cgroups"
	"nodeagent/cri/critest"
	"nodeagent/internal/layout"
	"nodeagent/manifest"
)

// Node shutdown waits between priority groups until a stopped pod is
// Released: nothing of it runs and its volumes are torn down, as the
// kubelet waits for a group's unmounts.
func TestAStoppedPodIsReleasedOnlyOnceItsVolumesAreTornDown(t *testing.T) {
	rt := critest.New()
	root := t.TempDir()
	discard := slog.New(slog.NewTextHandler(io.Discard, nil))
	m := NewManager(Options{NodeName: "n", MaxPods: 10, PodLogsDir: t.TempDir(), RootDir: root}, Deps{
		Runtime: rt, Cache: pleg.New(rt, pleg.Options{Node: "n", Clock: clock.RealClock{}, Log: discard}), Store: status.NewStore(), Clock: clock.RealClock{},
		Tree: cgroups.NewTree(nopCgroups{}, cgroups.TreeConfig{PerQOS: true}), Log: discard,
	})
	pod := testPod(corev1.RestartPolicyAlways, "a")
	pod.Annotations = map[string]string{manifest.AnnotationConfigSource: manifest.SourceFile}
	pod.Spec.Containers[0].ImagePullPolicy = corev1.PullIfNotPresent
	pod.Spec.Volumes = []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for end := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(end) {
				t.Fatalf("timed out waiting for %s", what)
			}
		}
	}
	volumes := layout.Root(root).Volumes(pod.UID)
	exists := func() bool { _, err := os.Stat(volumes); return err == nil }
	ctx, cancel := context.WithCancel(context.Background())
	updates := make(chan source.Update)
	done := make(chan struct{})
	go func() { m.Run(ctx, updates); close(done) }()
	defer func() { cancel(); <-done }()
	updates <- source.Update{Source: "file", Pods: []*corev1.Pod{pod}}
	waitFor("the container started", func() bool { return len(rt.Calls("StartContainer")) > 0 })
	if !exists() {
		t.Fatalf("no volume directory %s for a running pod", volumes)
	}
	if m.Released(pod.UID) {
		t.Fatal("a running pod is Released")
	}
	f := &Failure{Reason: "Terminated", Message: "node shutdown"}
	if _, err := m.StopPod(pod.UID, StopOptions{Grace: ptr.To[int64](0), Failure: f, Why: "test"}); err != nil {
		t.Fatal(err)
	}
	waitFor("the pod to be Released", func() bool { return m.Released(pod.UID) })
	if exists() {
		t.Errorf("Released while the volume directory %s is still there", volumes)
	}
}
