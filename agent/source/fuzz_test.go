package source

import (
	"encoding/json"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	"nodeagent/manifest"
)

// Whatever annotations a pod author writes, the pod the API source hands
// out carries none of the agent's own, says it came from the API, and
// keeps every other annotation as written.
func FuzzAPIPodAnnotations(f *testing.F) {
	f.Add([]byte(`{"nodeagent.io/manifest":"/etc/kubernetes/manifests/etcd.yaml","kubernetes.io/config.source":"file","kubernetes.io/config.hash":"x","a":"b"}`))
	f.Add([]byte(`{"NODEAGENT.IO/manifest":"x","nodeagent.io/":"","kubernetes.io/config.mirror":"h"}`))
	f.Add([]byte(`{"kubectl.kubernetes.io/last-applied-configuration":"{\"spec\":{}}"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var annotations map[string]string
		if json.Unmarshal(data, &annotations) != nil {
			return
		}
		pod := &corev1.Pod{}
		pod.Name, pod.Namespace, pod.UID, pod.ResourceVersion = "p", "ns", "u", "1"
		pod.Annotations = annotations
		src := NewAPI(nil, "n", quiet())
		src.store = cache.NewStore(cache.MetaNamespaceKeyFunc)
		if err := src.store.Add(pod); err != nil {
			t.Fatal(err)
		}
		got := src.desired()
		if _, mirror := annotations[AnnotationMirror]; mirror {
			if len(got) != 0 {
				t.Fatal("a mirror pod was handed out to run")
			}
			return
		}
		if len(got) != 1 {
			t.Fatalf("%d pods", len(got))
		}
		out := got[0].Annotations
		if out[manifest.AnnotationConfigSource] != SourceAPI || !FromAPI(got[0]) {
			t.Fatalf("config.source %q", out[manifest.AnnotationConfigSource])
		}
		// Spelled out here, not asked of the code under test.
		agentOwned := func(k string) bool {
			return strings.HasPrefix(k, "nodeagent.io/") || k == "kubernetes.io/config.source" || k == "kubernetes.io/config.hash"
		}
		for k, v := range out {
			if k != manifest.AnnotationConfigSource && agentOwned(k) {
				t.Fatalf("agent-owned annotation %q survived", k)
			}
			if k != manifest.AnnotationConfigSource && annotations[k] != v {
				t.Fatalf("annotation %q changed: %q -> %q", k, annotations[k], v)
			}
		}
		for k := range annotations {
			if _, kept := out[k]; !kept && !agentOwned(k) {
				t.Fatalf("the author's annotation %q was dropped", k)
			}
		}
	})
}
