package userns

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"

	"nodeagent/internal/layout"
)

func supported(string) (bool, error) { return true, nil }

func newManager(t *testing.T, root layout.Root, length uint32) *Manager {
	t.Helper()
	m, err := New(Config{Root: root, IDsPerPod: UnitLength, FirstID: UnitLength, Length: length, MaxPods: 2, Supports: supported})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func userPod(uid string, hostUsers *bool) *corev1.Pod {
	return &corev1.Pod{Spec: corev1.PodSpec{HostUsers: hostUsers}, ObjectMeta: podMeta(uid)}
}

func TestPodsGetDistinctRangesThatSurviveARestart(t *testing.T) {
	root := layout.Root(t.TempDir())
	m := newManager(t, root, 4*UnitLength)
	seen := map[uint32]types.UID{}
	for _, uid := range []string{"a", "b", "c", "d"} {
		ns, err := m.Options(userPod(uid, ptr.To(false)), "")
		if err != nil {
			t.Fatal(err)
		}
		if ns.Mode != runtimeapi.NamespaceMode_POD || len(ns.Uids) != 1 || len(ns.Gids) != 1 {
			t.Fatalf("pod %s: %+v", uid, ns)
		}
		u, g := ns.Uids[0], ns.Gids[0]
		if u.ContainerId != 0 || u.Length != UnitLength || u.HostId != g.HostId || u.HostId%UnitLength != 0 || u.HostId < UnitLength || u.HostId >= 5*UnitLength {
			t.Errorf("pod %s: mapping %+v / %+v", uid, u, g)
		}
		if other, ok := seen[u.HostId]; ok {
			t.Errorf("pods %s and %s share host ID %d", other, uid, u.HostId)
		}
		seen[u.HostId] = types.UID(uid)
	}
	if _, err := m.Options(userPod("e", ptr.To(false)), ""); err == nil || !strings.Contains(err.Error(), "all 4 ranges") {
		t.Errorf("a fifth pod in a pool of four: %v", err)
	}
	// The same pod asks again (a new sandbox): the same range, even with
	// its file gone, which is written again.
	os.Remove(root.UserNamespace("a"))
	again, _ := m.Options(userPod("a", ptr.To(false)), "")
	if seen[again.Uids[0].HostId] != "a" || m.InUse() != 4 {
		t.Errorf("pod a moved to %d (%d in use)", again.Uids[0].HostId, m.InUse())
	}
	if _, err := os.Stat(root.UserNamespace("a")); err != nil {
		t.Errorf("the range file was not written again: %v", err)
	}

	// A restarted agent reads the ranges back and hands out none twice.
	m2 := newManager(t, root, 4*UnitLength)
	if m2.InUse() != 4 {
		t.Fatalf("after restart %d ranges in use, want 4", m2.InUse())
	}
	for id, uid := range seen {
		ns, err := m2.Options(userPod(string(uid), ptr.To(false)), "")
		if err != nil || ns.Uids[0].HostId != id {
			t.Errorf("pod %s after restart: %v %v, want %d", uid, ns, err, id)
		}
	}
	m2.Release("b")
	if _, err := os.Stat(root.UserNamespace("b")); !os.IsNotExist(err) {
		t.Errorf("released pod's file: %v", err)
	}
	ns, err := m2.Options(userPod("e", ptr.To(false)), "")
	if err != nil {
		t.Fatal(err)
	}
	if seen[ns.Uids[0].HostId] != "b" {
		t.Errorf("pod e got %d, want the range b gave back", ns.Uids[0].HostId)
	}
}

func TestHostUsersPodsShareTheNodeNamespace(t *testing.T) {
	m := newManager(t, layout.Root(t.TempDir()), 4*UnitLength)
	for _, hu := range []*bool{nil, ptr.To(true)} {
		ns, err := m.Options(userPod("a", hu), "")
		if err != nil || ns.Mode != runtimeapi.NamespaceMode_NODE || len(ns.Uids) != 0 {
			t.Errorf("hostUsers %v: %+v %v", hu, ns, err)
		}
	}
	if m.InUse() != 0 {
		t.Errorf("%d ranges in use for host-user pods", m.InUse())
	}
}

func TestUnsupportedHandlerIsRefusedInTheKubeletsWords(t *testing.T) {
	m := newManager(t, layout.Root(t.TempDir()), 4*UnitLength)
	m.cfg.Supports = func(h string) (bool, error) {
		if h == "gone" {
			return false, errors.New(`the handler "gone" is not known`)
		}
		return false, nil
	}
	for handler, want := range map[string]string{
		"":     "can't set `spec.hostUsers: false`, runtime does not support user namespaces",
		"kata": "can't set `spec.hostUsers: false`, RuntimeClass handler \"kata\" does not support user namespaces",
		"gone": "can't set `spec.hostUsers: false`, RuntimeClass handler \"gone\" does not support user namespaces: the handler \"gone\" is not known",
	} {
		if _, err := m.Options(userPod("a", ptr.To(false)), handler); err == nil || err.Error() != want {
			t.Errorf("handler %q: %v, want %q", handler, err, want)
		}
	}
	if m.InUse() != 0 {
		t.Errorf("a refused pod holds a range")
	}
}

func TestBadPoolsAndFilesStopTheAgent(t *testing.T) {
	for name, cfg := range map[string]Config{
		"idsPerPod not a multiple": {IDsPerPod: 1000, FirstID: 65536, Length: 1 << 20, MaxPods: 1},
		"first range is root's":    {IDsPerPod: UnitLength, FirstID: 0, Length: 1 << 20, MaxPods: 1},
		"first not aligned":        {IDsPerPod: UnitLength, FirstID: 100000, Length: 1 << 20, MaxPods: 1},
		"too few for maxPods":      {IDsPerPod: UnitLength, FirstID: UnitLength, Length: 2 * UnitLength, MaxPods: 110},
		"past the last ID":         {IDsPerPod: UnitLength, FirstID: 1<<32 - UnitLength, Length: 2 * UnitLength, MaxPods: 1},
	} {
		cfg.Root, cfg.Supports = layout.Root(t.TempDir()), supported
		if _, err := New(cfg); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	for name, body := range map[string]string{
		"not json":           "{",
		"root unmapped":      `{"uidMappings":[{"hostId":65536,"containerId":1,"length":65536}],"gidMappings":[{"hostId":65536,"containerId":1,"length":65536}]}`,
		"uids and gids":      `{"uidMappings":[{"hostId":65536,"containerId":0,"length":65536}],"gidMappings":[{"hostId":131072,"containerId":0,"length":65536}]}`,
		"outside the pool":   `{"uidMappings":[{"hostId":0,"containerId":0,"length":65536}],"gidMappings":[{"hostId":0,"containerId":0,"length":65536}]}`,
		"another length":     `{"uidMappings":[{"hostId":65536,"containerId":0,"length":1000}],"gidMappings":[{"hostId":65536,"containerId":0,"length":1000}]}`,
		"two ranges in file": `{"uidMappings":[{"hostId":65536,"containerId":0,"length":65536},{"hostId":131072,"containerId":0,"length":65536}],"gidMappings":[]}`,
	} {
		root := layout.Root(t.TempDir())
		writeFile(t, root.UserNamespace("p"), body)
		_, err := New(Config{Root: root, IDsPerPod: UnitLength, FirstID: UnitLength, Length: 4 * UnitLength, MaxPods: 1, Supports: supported})
		if err == nil || !strings.Contains(err.Error(), root.UserNamespace("p")) {
			t.Errorf("%s: %v, want an error naming the file", name, err)
		}
	}
	// Two pods claiming one range: the second is refused.
	root := layout.Root(t.TempDir())
	same := `{"uidMappings":[{"hostId":131072,"containerId":0,"length":65536}],"gidMappings":[{"hostId":131072,"containerId":0,"length":65536}]}`
	writeFile(t, root.UserNamespace("p"), same)
	writeFile(t, root.UserNamespace("q"), same)
	if _, err := New(Config{Root: root, IDsPerPod: UnitLength, FirstID: UnitLength, Length: 4 * UnitLength, MaxPods: 1, Supports: supported}); err == nil || !strings.Contains(err.Error(), "already held by pod") {
		t.Errorf("a shared range: %v", err)
	}
	// A set-aside directory is a gone pod's: not read.
	root = layout.Root(t.TempDir())
	writeFile(t, filepath.Join(root.Pods(), ".orphan-p", "userns"), "{")
	if _, err := New(Config{Root: root, IDsPerPod: UnitLength, FirstID: UnitLength, Length: 4 * UnitLength, MaxPods: 1, Supports: supported}); err != nil {
		t.Errorf("a set-aside pod directory: %v", err)
	}
}

func TestParseSubIDs(t *testing.T) {
	if a, b, err := parseSubIDs("0: kubelet 65536 7208960\n"); err != nil || a != 65536 || b != 7208960 {
		t.Errorf("got %d %d %v", a, b, err)
	}
	for _, bad := range []string{"", "0: kubelet 65536\n", "0: kubelet 1 2\n1: kubelet 3 4\n", "0: kubelet x 2", "0: kubelet 1 99999999999"} {
		if _, _, err := parseSubIDs(bad); err == nil {
			t.Errorf("%q: accepted", bad)
		}
	}
}

func writeFile(t *testing.T, path, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
}

func podMeta(uid string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: "p-" + uid, UID: types.UID(uid)}
}
