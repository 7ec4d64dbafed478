package mirror

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"

	"nodeagent/agent/source"
	"nodeagent/manifest"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// apiCache reads the pods as the fake API server stores them.
type apiCache struct{ client *fake.Clientset }

func (c apiCache) Pod(namespace, name string) (*corev1.Pod, bool) {
	p, err := c.client.CoreV1().Pods(namespace).Get(context.Background(), name, metav1.GetOptions{})
	return p, err == nil
}

// mirrorCache is the API source's view of mirror pods, read from the fake.
type mirrorCache struct{ apiCache }

func (c mirrorCache) Mirrors() []*corev1.Pod {
	list, _ := c.client.CoreV1().Pods("").List(context.Background(), metav1.ListOptions{})
	var out []*corev1.Pod
	for i := range list.Items {
		if _, ok := list.Items[i].Annotations[source.AnnotationMirror]; ok {
			out = append(out, &list.Items[i])
		}
	}
	return out
}

// A mirror pod deleted gracefully is finished off and made again, and one
// whose static pod is gone is deleted even while it is being deleted: the
// API server waits for the node either way.
func TestMirrorsFinishGracefulDeletions(t *testing.T) {
	now := metav1.Now()
	static := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-n", Namespace: "default", UID: "static-uid",
		Annotations: map[string]string{manifest.AnnotationConfigHash: "h1", manifest.AnnotationManifest: "/etc/nodeagent/manifests/web.yaml"}}}
	deleting := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-n", Namespace: "default", UID: "mirror-1", DeletionTimestamp: &now,
		Annotations: map[string]string{source.AnnotationMirror: "h1"}}}
	orphan := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "old-n", Namespace: "default", UID: "mirror-2", DeletionTimestamp: &now,
		Annotations: map[string]string{source.AnnotationMirror: "h0"}}}
	client := fake.NewSimpleClientset(deleting, orphan)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", UID: "node-uid"}}
	m := NewManager(nil, mirrorCache{apiCache{client}}, func() *corev1.Node { return node }, nil, clocktesting.NewFakeClock(now.Time), quiet)
	m.SetStatic([]*corev1.Pod{static})
	m.sync(context.Background(), client)

	if _, err := client.CoreV1().Pods("default").Get(context.Background(), "old-n", metav1.GetOptions{}); err == nil {
		t.Error("the orphaned mirror pod being deleted is still there")
	}
	got, err := client.CoreV1().Pods("default").Get(context.Background(), "web-n", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the gracefully deleted mirror pod was not made again: %v", err)
	}
	if got.UID == "mirror-1" || got.DeletionTimestamp != nil || got.Annotations[source.AnnotationMirror] != "h1" {
		t.Errorf("mirror pod %s deleting %v hash %q: want a new one with hash h1", got.UID, got.DeletionTimestamp, got.Annotations[source.AnnotationMirror])
	}
	if f, ok := got.Annotations[manifest.AnnotationManifest]; ok || got.Annotations[manifest.AnnotationConfigHash] != "h1" {
		t.Errorf("mirror annotations %v: want the static pod's hash and no host path (%q)", got.Annotations, f)
	}
}

// An edited static pod's old mirror stays while the old pod stops.
func TestEditedStaticPodKeepsItsMirrorWhileTheOldPodStops(t *testing.T) {
	now := metav1.Now()
	edited := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-n", Namespace: "default", UID: "new-uid",
		Annotations: map[string]string{manifest.AnnotationConfigHash: "h2"}}}
	mirror := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-n", Namespace: "default", UID: "mirror-1",
		Annotations: map[string]string{source.AnnotationMirror: "h1"}}}
	client := fake.NewSimpleClientset(mirror)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", UID: "node-uid"}}
	stopping := true
	m := NewManager(nil, mirrorCache{apiCache{client}}, func() *corev1.Node { return node },
		func(ns, name string) bool { return stopping && ns == "default" && name == "web-n" }, clocktesting.NewFakeClock(now.Time), quiet)
	m.SetStatic([]*corev1.Pod{edited})
	m.sync(context.Background(), client)
	if got, err := client.CoreV1().Pods("default").Get(context.Background(), "web-n", metav1.GetOptions{}); err != nil || got.UID != "mirror-1" {
		t.Fatalf("while the old pod stops the old mirror must stay: %v %v", got, err)
	}

	stopping = false
	m.sync(context.Background(), client)
	if got, err := client.CoreV1().Pods("default").Get(context.Background(), "web-n", metav1.GetOptions{}); err == nil && got.UID == "mirror-1" {
		t.Error("once the old pod is gone the old mirror must go")
	}
}

// A removed static pod's mirror stays while the pod stops.
func TestRemovedStaticPodKeepsItsMirrorWhileItStops(t *testing.T) {
	mirror := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-n", Namespace: "default", UID: "mirror-1",
		Annotations: map[string]string{source.AnnotationMirror: "h1"}}}
	client := fake.NewSimpleClientset(mirror)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", UID: "node-uid"}}
	stopping := true
	m := NewManager(nil, mirrorCache{apiCache{client}}, func() *corev1.Node { return node }, func(string, string) bool { return stopping },
		clocktesting.NewFakeClock(time.Now()), quiet)
	m.SetStatic(nil)
	m.sync(context.Background(), client)
	if _, err := client.CoreV1().Pods("default").Get(context.Background(), "web-n", metav1.GetOptions{}); err != nil {
		t.Fatalf("the mirror went while its pod stops: %v", err)
	}
	stopping = false
	m.sync(context.Background(), client)
	if _, err := client.CoreV1().Pods("default").Get(context.Background(), "web-n", metav1.GetOptions{}); err == nil {
		t.Error("the mirror stayed after its pod stopped")
	}
}
