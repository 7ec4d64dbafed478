package pods

import (
	"context"
	"os"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"nodeagent/agent/source"
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
	m := newRelistingManager(t, rt, root)
	pod := testPod(corev1.RestartPolicyAlways, "a")
	pod.Annotations = map[string]string{manifest.AnnotationConfigSource: manifest.SourceFile}
	pod.Spec.Containers[0].ImagePullPolicy = corev1.PullIfNotPresent
	pod.Spec.Volumes = []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	volumes := layout.Root(root).Volumes(pod.UID)
	exists := func() bool { _, err := os.Stat(volumes); return err == nil }
	ctx, cancel := context.WithCancel(context.Background())
	updates := make(chan source.Update)
	done := make(chan struct{})
	go func() { m.Run(ctx, updates); close(done) }()
	defer func() { cancel(); <-done }()
	updates <- source.Update{Source: "file", Pods: []*corev1.Pod{pod}}
	waitUntil(t, "the container started", func() bool { return len(rt.Calls("StartContainer")) > 0 })
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
	waitUntil(t, "the pod to be Released", func() bool { return m.Released(pod.UID) })
	if exists() {
		t.Errorf("Released while the volume directory %s is still there", volumes)
	}
}
