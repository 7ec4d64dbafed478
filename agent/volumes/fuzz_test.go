package volumes

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clocktesting "k8s.io/utils/clock/testing"

	"nodeagent/manifest"
)

func errNotFound(name string) error {
	return apierrors.NewNotFound(schema.GroupResource{Resource: "configmap"}, name)
}

// fuzzObjects holds one configMap and one secret, named cm and s, whose
// keys are whatever the pod asks for (each value as long as its key name
// times 100 bytes times grow): the fuzzer reaches every path of the
// projection.
type fuzzObjects struct {
	keys map[string]bool
	grow *int // the objects' resourceVersion, and how much their values grew
}

func (f fuzzObjects) data() map[string][]byte {
	out := map[string][]byte{}
	for k := range f.keys {
		out[k] = []byte(strings.Repeat("x", 100*len(k)**f.grow))
	}
	return out
}

func (f fuzzObjects) ConfigMap(_ context.Context, _, name string) (*corev1.ConfigMap, error) {
	if name != "cm" {
		return nil, errNotFound(name)
	}
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{ResourceVersion: fmt.Sprint(*f.grow)}, BinaryData: f.data()}, nil
}

func (f fuzzObjects) Secret(_ context.Context, _, name string) (*corev1.Secret, error) {
	if name != "s" {
		return nil, errNotFound(name)
	}
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{ResourceVersion: fmt.Sprint(*f.grow)}, Data: f.data()}, nil
}

func (f fuzzObjects) Token(_ context.Context, _ *corev1.Pod, _ *corev1.ServiceAccountTokenProjection) (string, time.Time, error) {
	return "token", time.Unix(2_000_000, 0), nil
}

// What a pod from the API brings to its content volumes: items and their
// paths and modes, projected sources, downwardAPI paths and fields,
// annotations and labels (the downward API writes them). Any pod that
// passes validation is written entirely below its volume's directory,
// within the limit, or refused; nothing panics and nothing lands
// elsewhere, also when the objects grow and the volumes are written again.
func FuzzAPIPodContentVolumes(f *testing.F) {
	f.Add([]byte(`{"metadata":{"annotations":{"a":"b"},"labels":{"l":"v"}},"spec":{"volumes":[{"name":"v","projected":{"sources":[
		{"configMap":{"name":"cm","items":[{"key":"k","path":"a/b"},{"key":"k","path":"c","mode":256}]}},
		{"downwardAPI":{"items":[{"path":"ann","fieldRef":{"fieldPath":"metadata.annotations"}},{"path":"lab/x","fieldRef":{"fieldPath":"metadata.labels['l']"}}]}},
		{"serviceAccountToken":{"path":"token"}},{"secret":{"name":"s","items":[{"key":"key","path":"key"}]}}]}}]}}`))
	f.Add([]byte(`{"spec":{"volumes":[{"name":"c","configMap":{"name":"cm","defaultMode":511,"items":[{"key":"k","path":"..data/x"},{"key":"k","path":"/etc/passwd"}]}},{"name":"s","secret":{"secretName":"s","optional":true}}]}}`))
	f.Add([]byte(`{"spec":{"volumes":[{"name":"d","downwardAPI":{"items":[{"path":"a/../../b","fieldRef":{"fieldPath":"metadata.name"}},{"path":"cpu","resourceFieldRef":{"containerName":"c","resource":"limits.cpu","divisor":"1m"}}]}}]}}`))
	f.Add([]byte(`{"spec":{"volumes":[{"name":"c","configMap":{"name":"cm","items":[{"key":"kkkkkkkkkk","path":"1"},{"key":"kkkkkkkkkk","path":"2"},{"key":"kkkkkkkkkk","path":"3"}]}}]}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var pod corev1.Pod
		if json.Unmarshal(data, &pod) != nil {
			return
		}
		pod.Name, pod.Namespace, pod.UID = "p", "ns", "uid-1"
		pod.Spec.RestartPolicy, pod.Spec.DNSPolicy = corev1.RestartPolicyAlways, corev1.DNSClusterFirst
		pod.Spec.Containers = []corev1.Container{{Name: "c", Image: "i"}}
		pod.Spec.InitContainers, pod.Spec.EphemeralContainers = nil, nil
		if len(manifest.Validate(&pod)) > 0 {
			return
		}
		grow := 1
		objs := fuzzObjects{keys: map[string]bool{}, grow: &grow}
		for _, v := range pod.Spec.Volumes {
			for _, it := range allItems(&v) {
				objs.keys[it.Key] = true
			}
		}
		root := t.TempDir()
		m := New(Config{Root: root, Objects: objs, HostIP: "10.0.0.1", Clock: clocktesting.NewFakeClock(time.Unix(1_000_000, 0)), Limit: 64 << 10,
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("1Gi")},
			Tmpfs:       func(string, int64) error { return nil }})
		for ; grow <= 4; grow *= 4 {
			_, failures := m.SetUp(context.Background(), &pod)
			failed := map[string]bool{}
			for _, f := range failures {
				failed[f.Volume] = true
			}
			podVolumes := filepath.Join(root, "pods", "uid-1", "volumes")
			var written int64
			filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
				if err != nil || p == root || strings.HasPrefix(podVolumes, p) {
					return err
				}
				if !strings.HasPrefix(p, podVolumes+"/") {
					t.Fatalf("%s written outside the pod's volumes", p)
				}
				if d.Type().IsRegular() {
					info, _ := d.Info()
					written += info.Size()
				}
				return nil
			})
			if written > 64<<10 {
				t.Fatalf("%d bytes on disk (objects grown %dx), over the 64 KiB limit", written, grow)
			}
			for _, v := range pod.Spec.Volumes {
				if pluginFor(&v) == nil || failed[v.Name] {
					continue
				}
				if _, err := os.Readlink(filepath.Join(volumeDir(root, pod.UID, &v), "..data")); err != nil {
					t.Fatalf("volume %s neither written nor refused: %v", v.Name, err)
				}
			}
		}
	})
}

// allItems are the configMap and secret items a volume names.
func allItems(v *corev1.Volume) []corev1.KeyToPath {
	switch {
	case v.ConfigMap != nil:
		return v.ConfigMap.Items
	case v.Secret != nil:
		return v.Secret.Items
	case v.Projected != nil:
		var out []corev1.KeyToPath
		for _, s := range v.Projected.Sources {
			if s.ConfigMap != nil {
				out = append(out, s.ConfigMap.Items...)
			}
			if s.Secret != nil {
				out = append(out, s.Secret.Items...)
			}
		}
		return out
	}
	return nil
}
