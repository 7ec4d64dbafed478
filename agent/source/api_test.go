package source

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"nodeagent/manifest"
)

// A pod author cannot set the annotations the agent keeps for itself: the
// manifest file nodectl delete would remove, the static pod's hash, its
// source. Their own annotations pass untouched.
func TestAPIPodsLoseAgentOwnedAnnotations(t *testing.T) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "evil", Namespace: "default", UID: "u1", ResourceVersion: "1", Annotations: map[string]string{
			manifest.AnnotationManifest:     "/etc/kubernetes/manifests/etcd.yaml",
			manifest.AnnotationConfigSource: manifest.SourceFile,
			manifest.AnnotationConfigHash:   "u1",
			"nodeagent.io/pod-cgroup":       "/",
			"example.com/mine":              "kept",
		}},
		Spec: corev1.PodSpec{NodeName: "n", Containers: []corev1.Container{{Name: "c", Image: "i"}}},
	}
	src := NewAPI(nil, "n", quiet())
	src.store = cache.NewStore(cache.MetaNamespaceKeyFunc)
	if err := src.store.Add(pod); err != nil {
		t.Fatal(err)
	}
	u := Update{Pods: src.desired()}
	if len(u.Pods) != 1 {
		t.Fatalf("pods = %v", u.Pods)
	}
	got := u.Pods[0].Annotations
	want := map[string]string{manifest.AnnotationConfigSource: SourceAPI, "example.com/mine": "kept"}
	if len(got) != len(want) {
		t.Errorf("annotations %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("annotation %s = %q, want %q (all: %v)", k, got[k], v, got)
		}
	}
	if !FromAPI(u.Pods[0]) {
		t.Error("the pod does not read as an API pod")
	}
	if pod.Annotations[manifest.AnnotationManifest] == "" {
		t.Error("the informer's own object was modified")
	}
}
