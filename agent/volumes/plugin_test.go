package volumes

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

// Every type is set up through its plugin: the directory volumes under
// the pod's, a hostPath where it is; a set-up volume is looked up, not
// made again; tear-down removes what the pod's plugins made and never a
// host path.
func TestEachVolumeThroughItsPlugin(t *testing.T) {
	root, host := t.TempDir(), t.TempDir()
	type mount struct {
		dir  string
		size int64
	}
	var tmpfs []mount
	objs := &fakeObjects{configMaps: map[string]*corev1.ConfigMap{"ns/cfg": {Data: map[string]string{"k": "v"}}}}
	m := New(Config{Root: root, Objects: objs, Clock: clocktesting.NewFakeClock(time.Unix(1_000_000, 0)),
		Tmpfs: func(dir string, size int64) error { tmpfs = append(tmpfs, mount{dir, size}); return nil }})
	limit := resource.MustParse("64Mi")
	pod := volumePod(
		corev1.Volume{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		corev1.Volume{Name: "shm", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: &limit}}},
		corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: host, Type: ptr.To(corev1.HostPathDirectory)}}},
		corev1.Volume{Name: "lock", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: filepath.Join(host, "xtables.lock"), Type: ptr.To(corev1.HostPathFileOrCreate)}}},
		corev1.Volume{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}}},
	)
	if _, failures := m.SetUp(context.Background(), pod); len(failures) > 0 {
		t.Fatal(failures)
	}
	volumes := filepath.Join(root, "pods", "uid-1", "volumes")
	want := map[string]Mounted{
		"scratch": {Path: filepath.Join(volumes, "kubernetes.io~empty-dir", "scratch")},
		"shm":     {Path: filepath.Join(volumes, "kubernetes.io~empty-dir", "shm")},
		"data":    {Path: host},
		"lock":    {Path: filepath.Join(host, "xtables.lock")},
		"cfg":     {Path: filepath.Join(volumes, "kubernetes.io~configmap", "cfg"), ReadOnly: true},
	}
	for name, w := range want {
		if got, ok := m.Mount(pod.UID, name); !ok || got != w {
			t.Errorf("volume %s set up as %+v (%v), want %+v", name, got, ok, w)
		}
	}
	if st, err := os.Stat(want["lock"].Path); err != nil || !st.Mode().IsRegular() {
		t.Errorf("FileOrCreate hostPath: %v %v, want a file", st, err)
	}
	if st, err := os.Stat(want["scratch"].Path); err != nil || st.Mode().Perm() != 0o777 {
		t.Errorf("emptyDir: %v %v, want a directory 0777", st, err)
	}
	if len(tmpfs) != 1 || tmpfs[0] != (mount{want["shm"].Path, 64 << 20}) {
		t.Errorf("tmpfs mounts %+v, want one of 64 MiB for the memory emptyDir", tmpfs)
	}
	if got := UsageDirs(root, pod); len(got) != 1 || got[0] != want["scratch"].Path {
		t.Errorf("usage dirs %q, want the disk emptyDir's only", got)
	}

	// Set up once: a memory emptyDir is not mounted again, a hostPath not
	// checked again (its file may go while the pod runs).
	os.Remove(want["lock"].Path)
	if _, failures := m.SetUp(context.Background(), pod); len(failures) > 0 || len(tmpfs) != 1 {
		t.Fatalf("second set-up: failures %v, tmpfs %+v", failures, tmpfs)
	}
	if _, err := os.Lstat(want["lock"].Path); err == nil {
		t.Error("a set-up hostPath was checked (and made) again")
	}

	if err := m.TearDown(pod.UID); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(volumes); err == nil {
		t.Errorf("%s left after tear-down", volumes)
	}
	if _, err := os.Stat(host); err != nil {
		t.Errorf("tear-down removed the hostPath: %v", err)
	}
	if _, ok := m.Mount(pod.UID, "scratch"); ok {
		t.Error("a torn-down volume is still looked up")
	}
}

// A hostPath whose check fails blocks the pod with the kubelet's
// FailedMount message until it passes.
func TestHostPathCheckBlocksUntilItPasses(t *testing.T) {
	m, _, _ := newTestManager(t, nil)
	path := filepath.Join(t.TempDir(), "socket-dir")
	pod := volumePod(corev1.Volume{Name: "run", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: path, Type: ptr.To(corev1.HostPathDirectory)}}})
	_, failures := m.SetUp(context.Background(), pod)
	want := `MountVolume.SetUp failed for volume "run" : hostPath type check failed, ` + path + ` is not a directory, unable to determine its type: path "` + path + `" does not exist`
	if len(failures) != 1 || !failures[0].Blocking || failures[0].Error() != want {
		t.Fatalf("failures %v, want one blocking: %s", failures, want)
	}
	if _, ok := m.Mount(pod.UID, "run"); ok {
		t.Error("a volume that failed its check is looked up")
	}
	if err := os.Mkdir(path, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, failures := m.SetUp(context.Background(), pod); len(failures) > 0 {
		t.Fatal(failures)
	}
	if got, ok := m.Mount(pod.UID, "run"); !ok || got.Path != path {
		t.Errorf("mounted %+v %v", got, ok)
	}
}

// What no plugin honours is refused at admission, at its field.
func TestCheckNamesTheField(t *testing.T) {
	pod := volumePod(
		corev1.Volume{Name: "nfs", VolumeSource: corev1.VolumeSource{NFS: &corev1.NFSVolumeSource{Server: "s", Path: "/"}}},
		corev1.Volume{Name: "huge", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumHugePages}}},
		corev1.Volume{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{}}},
		corev1.Volume{Name: "p", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
			{DownwardAPI: &corev1.DownwardAPIProjection{}}, {ClusterTrustBundle: &corev1.ClusterTrustBundleProjection{}}, {ServiceAccountToken: &corev1.ServiceAccountTokenProjection{}}}}}},
	)
	var got []string
	for _, e := range Check(pod, true) {
		got = append(got, e.Field)
	}
	want := "spec.volumes[0].nfs spec.volumes[1].emptyDir.medium spec.volumes[2].configMap spec.volumes[3].projected.sources[1].clusterTrustBundle spec.volumes[3].projected.sources[2].serviceAccountToken"
	if strings.Join(got, " ") != want {
		t.Errorf("static pod: refused %q, want %q", got, want)
	}
	got = nil
	for _, e := range Check(pod, false) {
		got = append(got, e.Field)
	}
	if want := "spec.volumes[0].nfs spec.volumes[1].emptyDir.medium spec.volumes[3].projected.sources[1].clusterTrustBundle"; strings.Join(got, " ") != want {
		t.Errorf("API pod: refused %q, want %q", got, want)
	}
}

// With fsGroup, an emptyDir is the group's with set-group-ID, as the
// kubelet's SetVolumeOwnership leaves it.
func TestEmptyDirBelongsToFSGroup(t *testing.T) {
	root := t.TempDir()
	m := New(Config{Root: root, Objects: &fakeObjects{}, Clock: clocktesting.NewFakeClock(time.Unix(1_000_000, 0)),
		Tmpfs: func(string, int64) error { return nil }})
	pod := volumePod(corev1.Volume{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	pod.Spec.SecurityContext = &corev1.PodSecurityContext{FSGroup: ptr.To(int64(4321))}
	if _, failures := m.SetUp(context.Background(), pod); len(failures) > 0 {
		t.Fatal(failures)
	}
	got, _ := m.Mount(pod.UID, "scratch")
	st, err := os.Stat(got.Path)
	if err != nil {
		t.Fatal(err)
	}
	if gid := st.Sys().(*syscall.Stat_t).Gid; gid != 4321 || st.Mode()&os.ModeSetgid == 0 || st.Mode().Perm() != 0o777 {
		t.Errorf("emptyDir gid %d mode %v, want 4321 and drwxrwsrwx", gid, st.Mode())
	}
}
