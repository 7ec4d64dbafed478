package volumes

import (
	"context"
	"errors"
	"fmt"
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
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"nodeagent/internal/layout"
)

type fakeObjects struct {
	configMaps map[string]*corev1.ConfigMap
	secrets    map[string]*corev1.Secret
	tokens     int
	due        time.Time
}

func (f *fakeObjects) ConfigMap(_ context.Context, ns, name string) (*corev1.ConfigMap, error) {
	if cm, ok := f.configMaps[ns+"/"+name]; ok {
		return cm, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "configmap"}, name)
}

func (f *fakeObjects) Secret(_ context.Context, ns, name string) (*corev1.Secret, error) {
	if s, ok := f.secrets[ns+"/"+name]; ok {
		return s, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "secret"}, name)
}

func (f *fakeObjects) Token(_ context.Context, pod *corev1.Pod, p *corev1.ServiceAccountTokenProjection) (string, time.Time, error) {
	f.tokens++
	return "token-" + pod.Spec.ServiceAccountName + "-" + string(rune('0'+f.tokens)), f.due, nil
}

func newTestManager(t *testing.T, objs Objects) (*Manager, *clocktesting.FakeClock, string) {
	root := t.TempDir()
	clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	alloc := corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}
	return New(Config{Root: root, Objects: objs, Allocatable: alloc, HostIP: "10.0.0.1", Tmpfs: func(string, int64) error { return nil }, Clock: clk}), clk, root
}

func volumePod(vols ...corev1.Volume) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "uid-1", Labels: map[string]string{"b": "2", "a": "x\"y"}},
		Spec: corev1.PodSpec{ServiceAccountName: "sa", Volumes: vols,
			Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")}}}}},
	}
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestConfigMapVolumeFollowsTheObject(t *testing.T) {
	objs := &fakeObjects{configMaps: map[string]*corev1.ConfigMap{"ns/cfg": {Data: map[string]string{"k": "v1", "other": "o"}, BinaryData: map[string][]byte{"bin": {0, 1}}}}}
	m, _, root := newTestManager(t, objs)
	v := corev1.Volume{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}}}
	pod := volumePod(v)
	if _, failures := m.SetUp(context.Background(), pod); len(failures) != 0 {
		t.Fatal(failures)
	}
	dir := volumeDir(root, pod.UID, &v)
	if !strings.HasSuffix(dir, "pods/uid-1/volumes/kubernetes.io~configmap/cfg") {
		t.Errorf("dir %s is not the kubelet's layout", dir)
	}
	if readFile(t, filepath.Join(dir, "k")) != "v1" || readFile(t, filepath.Join(dir, "bin")) != "\x00\x01" {
		t.Error("data and binaryData not written")
	}
	objs.configMaps["ns/cfg"] = &corev1.ConfigMap{Data: map[string]string{"k": "v2"}}
	m.SetUp(context.Background(), pod)
	if readFile(t, filepath.Join(dir, "k")) != "v2" {
		t.Error("update not written")
	}
	if _, err := os.Lstat(filepath.Join(dir, "other")); !os.IsNotExist(err) {
		t.Error("a removed key is still there")
	}
}

func TestItemsModesAndMissingKeys(t *testing.T) {
	objs := &fakeObjects{secrets: map[string]*corev1.Secret{"ns/s": {Data: map[string][]byte{"user": []byte("u")}}}}
	m, _, root := newTestManager(t, objs)
	v := corev1.Volume{Name: "s", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "s", DefaultMode: ptr.To[int32](0o400),
		Items: []corev1.KeyToPath{{Key: "user", Path: "creds/user", Mode: ptr.To[int32](0o440)}}}}}
	pod := volumePod(v)
	if _, failures := m.SetUp(context.Background(), pod); len(failures) != 0 {
		t.Fatal(failures)
	}
	st, err := os.Stat(filepath.Join(volumeDir(root, pod.UID, &v), "creds", "user"))
	if err != nil || st.Mode().Perm() != 0o440 {
		t.Fatalf("item mode: %v %v", st, err)
	}

	v.Secret.Items = append(v.Secret.Items, corev1.KeyToPath{Key: "password", Path: "p"})
	_, failures := m.SetUp(context.Background(), volumePod(v))
	if len(failures) != 1 || failures[0].Blocking || !strings.Contains(failures[0].Error(), "secret references non-existent secret key: password") {
		t.Errorf("missing key on a written volume: %v", failures)
	}
	v.Secret.Optional = ptr.To(true)
	if _, failures := m.SetUp(context.Background(), volumePod(v)); len(failures) != 0 {
		t.Errorf("missing key of an optional secret: %v", failures)
	}
}

func TestMissingObjectBlocksUntilItExists(t *testing.T) {
	objs := &fakeObjects{configMaps: map[string]*corev1.ConfigMap{}}
	m, _, root := newTestManager(t, objs)
	v := corev1.Volume{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "missing"}}}}
	_, failures := m.SetUp(context.Background(), volumePod(v))
	if len(failures) != 1 || !failures[0].Blocking {
		t.Fatalf("failures %v, want one blocking", failures)
	}
	if want := `MountVolume.SetUp failed for volume "cfg" : configmap "missing" not found`; failures[0].Error() != want {
		t.Errorf("message %q, want %q", failures[0].Error(), want)
	}

	v.ConfigMap.Optional = ptr.To(true)
	if _, failures := m.SetUp(context.Background(), volumePod(v)); len(failures) != 0 {
		t.Fatalf("optional missing object: %v", failures)
	}
	if _, err := os.Readlink(filepath.Join(volumeDir(root, "uid-1", &v), "..data")); err != nil {
		t.Errorf("optional missing object: no empty volume: %v", err)
	}
}

func TestDownwardAPIAndProjectedToken(t *testing.T) {
	objs := &fakeObjects{configMaps: map[string]*corev1.ConfigMap{"ns/kube-root-ca.crt": {Data: map[string]string{"ca.crt": "CA"}}}}
	m, clk, root := newTestManager(t, objs)
	objs.due = clk.Now().Add(time.Hour)
	dv := corev1.Volume{Name: "info", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{Items: []corev1.DownwardAPIVolumeFile{
		{Path: "labels", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels"}},
		{Path: "cpu", ResourceFieldRef: &corev1.ResourceFieldSelector{ContainerName: "c", Resource: "limits.cpu", Divisor: resource.MustParse("1m")}},
		{Path: "mem", ResourceFieldRef: &corev1.ResourceFieldSelector{ContainerName: "c", Resource: "limits.memory"}},
	}}}}
	pv := corev1.Volume{Name: "kube-api-access", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{DefaultMode: ptr.To[int32](0o644), Sources: []corev1.VolumeProjection{
		{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr.To[int64](3607)}},
		{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"}, Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
		{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "namespace", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}}}},
	}}}}
	pod := volumePod(dv, pv)
	refresh, failures := m.SetUp(context.Background(), pod)
	if len(failures) != 0 {
		t.Fatal(failures)
	}
	if refresh != time.Hour {
		t.Errorf("refresh in %v, want the token's rotation in 1h", refresh)
	}
	d := volumeDir(root, pod.UID, &dv)
	if got := readFile(t, filepath.Join(d, "labels")); got != "a=\"x\\\"y\"\nb=\"2\"" {
		t.Errorf("labels file %q", got)
	}
	if readFile(t, filepath.Join(d, "cpu")) != "250" || readFile(t, filepath.Join(d, "mem")) != "1073741824" {
		t.Error("resource files wrong (limit, and allocatable for an unset limit)")
	}
	p := volumeDir(root, pod.UID, &pv)
	if readFile(t, filepath.Join(p, "token")) != "token-sa-1" || readFile(t, filepath.Join(p, "ca.crt")) != "CA" || readFile(t, filepath.Join(p, "namespace")) != "ns" {
		t.Error("kube-api-access content wrong")
	}
	m.SetUp(context.Background(), pod)
	if readFile(t, filepath.Join(p, "token")) != "token-sa-2" {
		t.Error("a new token was not written")
	}
}

func TestNoAPIServer(t *testing.T) {
	m, _, _ := newTestManager(t, nil)
	v := corev1.Volume{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "x"}}}}
	if _, failures := m.SetUp(context.Background(), volumePod(v)); len(failures) != 1 || !failures[0].Blocking {
		t.Errorf("failures %v, want one blocking", failures)
	}
}

func TestUnchangedContentIsNotReadOrWrittenAgain(t *testing.T) {
	objs := &fakeObjects{configMaps: map[string]*corev1.ConfigMap{"ns/cfg": {Data: map[string]string{"k": "v1"}}}}
	m, _, root := newTestManager(t, objs)
	v := corev1.Volume{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}}}
	pod := volumePod(v)
	m.SetUp(context.Background(), pod)
	dir := volumeDir(root, pod.UID, &v)
	data, _ := os.Readlink(filepath.Join(dir, "..data"))
	// A sync with the same content leaves the files alone (this one was
	// changed behind the manager's back to show it is not even compared).
	os.WriteFile(filepath.Join(dir, data, "k"), []byte("local"), 0o644)
	m.SetUp(context.Background(), pod)
	if readFile(t, filepath.Join(dir, "k")) != "local" {
		t.Error("unchanged content was written again")
	}
	// Gone from disk, or forgotten (a new worker): written again.
	os.Remove(filepath.Join(dir, "..data"))
	m.SetUp(context.Background(), pod)
	if readFile(t, filepath.Join(dir, "k")) != "v1" {
		t.Error("a volume gone from disk was not written again")
	}
	os.WriteFile(filepath.Join(dir, "k"), []byte("local"), 0o644)
	m.Forget(pod.UID)
	m.SetUp(context.Background(), pod)
	if readFile(t, filepath.Join(dir, "k")) != "v1" {
		t.Error("after Forget the content on disk was not compared")
	}
}

// A projected volume that names one large key under thousands of paths
// is refused before anything is written, naming its size and the limit;
// within the limit the same volume is written, on a tmpfs sized for it.
func TestContentOverTheLimitIsRefusedUnwritten(t *testing.T) {
	big := strings.Repeat("x", 900<<10)
	objs := &fakeObjects{configMaps: map[string]*corev1.ConfigMap{"ns/big": {ObjectMeta: metav1.ObjectMeta{ResourceVersion: "7"}, Data: map[string]string{"k": big}}}}
	root := t.TempDir()
	var mounted []int64
	m := New(Config{Root: root, Objects: objs, HostIP: "10.0.0.1", Clock: clocktesting.NewFakeClock(time.Unix(1_000_000, 0)), Limit: 8 << 20,
		Tmpfs: func(_ string, size int64) error { mounted = append(mounted, size); return nil }})
	projected := func(name string, copies int) corev1.Volume {
		var items []corev1.KeyToPath
		for i := range copies {
			items = append(items, corev1.KeyToPath{Key: "k", Path: fmt.Sprintf("d/%d", i)})
		}
		return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "big"}, Items: items}}}}}}
	}
	huge := projected("huge", 3000)
	pod := volumePod(huge)
	for range 2 { // the retry is refused the same way
		_, failures := m.SetUp(context.Background(), pod)
		if len(failures) != 1 || !failures[0].Blocking || !errors.Is(failures[0].Err, ErrTooLarge) {
			t.Fatalf("failures %v, want one blocking ErrTooLarge", failures)
		}
		msg := failures[0].Error()
		for _, want := range []string{`volume "huge"`, "2.6Gi in 3000 files", "8.0Mi"} {
			if !strings.Contains(msg, want) {
				t.Errorf("message %q does not say %q", msg, want)
			}
		}
	}
	if entries, err := os.ReadDir(filepath.Dir(volumeDir(root, pod.UID, &huge))); err == nil && len(entries) > 0 {
		t.Errorf("something was written for the refused volume: %v", entries)
	}
	if len(mounted) != 0 {
		t.Errorf("a tmpfs was mounted for the refused volume")
	}

	// Eight copies fit alone; a second such volume does not fit beside it.
	small, other := projected("small", 8), projected("other", 8)
	_, failures := m.SetUp(context.Background(), volumePod(small, other))
	if len(failures) != 1 || failures[0].Volume != "other" || !strings.Contains(failures[0].Error(), "in the pod's other content volumes") {
		t.Fatalf("failures %v, want only the second volume refused, naming the others' share", failures)
	}
	if got := readFile(t, filepath.Join(volumeDir(root, pod.UID, &small), "d", "7")); len(got) != len(big) {
		t.Errorf("the volume within the limit holds %d bytes, want %d", len(got), len(big))
	}
	if len(mounted) != 1 || mounted[0] != 2*(8<<20)+1<<20 {
		t.Errorf("tmpfs sizes %v, want one of twice the limit and a MiB", mounted)
	}
}

// A volume refused keeps its older content on disk, and that counts: a
// volume that grows cannot take the room another volume still holds, so
// what the pod's volumes hold never passes the limit.
func TestContentHeldOnDiskCountsTowardTheLimit(t *testing.T) {
	cm := func(rv string, n int) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{ResourceVersion: rv}, Data: map[string]string{"k": strings.Repeat("x", n)}}
	}
	objs := &fakeObjects{configMaps: map[string]*corev1.ConfigMap{"ns/a": cm("1", 10), "ns/b": cm("1", 900<<10)}}
	root := t.TempDir()
	m := New(Config{Root: root, Objects: objs, Clock: clocktesting.NewFakeClock(time.Unix(1_000_000, 0)), Limit: 1 << 20, Tmpfs: func(string, int64) error { return nil }})
	vol := func(name string) corev1.Volume {
		return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: name}}}}
	}
	pod := volumePod(vol("a"), vol("b"))
	if _, failures := m.SetUp(context.Background(), pod); len(failures) != 0 {
		t.Fatal(failures)
	}
	onDisk := func() int64 {
		var n int64
		filepath.Walk(filepath.Join(root, "pods"), func(_ string, info os.FileInfo, err error) error {
			if err == nil && info.Mode().IsRegular() {
				n += info.Size()
			}
			return nil
		})
		return n
	}
	// a grows to 900 KiB while b holds its 900 KiB: a is refused.
	objs.configMaps["ns/a"] = cm("2", 900<<10)
	_, failures := m.SetUp(context.Background(), pod)
	if len(failures) != 1 || failures[0].Volume != "a" || failures[0].Blocking {
		t.Fatalf("failures %v, want a refused (it keeps its older content)", failures)
	}
	if n := onDisk(); n > 1<<20 {
		t.Errorf("%d bytes on disk, over the 1 MiB limit", n)
	}
	// b shrinks: a fits at the next sync (b is written after a's turn).
	objs.configMaps["ns/b"] = cm("2", 10)
	m.SetUp(context.Background(), pod)
	if _, failures := m.SetUp(context.Background(), pod); len(failures) != 0 {
		t.Errorf("after b shrank: %v", failures)
	}
	if n := onDisk(); n > 1<<20 || n < 900<<10 {
		t.Errorf("%d bytes on disk: want a's 900 KiB and b's few", n)
	}
}

// volumeDir is where volume v of the pod lives, by its plugin.
func volumeDir(root string, uid types.UID, v *corev1.Volume) string {
	return layout.Root(root).Volume(uid, pluginFor(v).Name(), v.Name)
}
