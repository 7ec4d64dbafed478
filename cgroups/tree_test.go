package cgroups

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// memManager is an in-memory Manager recording the last values per cgroup.
type memManager struct {
	mu   sync.Mutex
	sets map[string]*ResourceConfig
}

func (m *memManager) Set(n Name, rc *ResourceConfig) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := n.Validate(); err != nil {
		return err
	}
	m.sets[n.Cgroupfs()] = rc
	return nil
}
func (m *memManager) Update(n Name, rc *ResourceConfig) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.sets[n.Cgroupfs()]; !ok {
		return missing(n)
	}
	m.sets[n.Cgroupfs()] = rc
	return nil
}
func (m *memManager) Exists(n Name) bool       { _, ok := m.sets[n.Cgroupfs()]; return ok }
func (m *memManager) Pids(Name) ([]int, error) { return nil, nil }
func (m *memManager) Children(n Name) ([]string, error) {
	var out []string
	prefix := n.Cgroupfs() + "/"
	for p := range m.sets {
		if rest, ok := strings.CutPrefix(p, prefix); ok && !strings.Contains(rest, "/") {
			out = append(out, rest)
		}
	}
	sort.Strings(out)
	return out, nil
}
func (m *memManager) Remove(n Name) error        { delete(m.sets, n.Cgroupfs()); return nil }
func (m *memManager) Path(n Name) string         { return n.Cgroupfs() }
func (m *memManager) CgroupParent(n Name) string { return n.Cgroupfs() }
func (m *memManager) Version() int               { return 1 }

func TestTreeLayout(t *testing.T) {
	mgr := &memManager{sets: map[string]*ResourceConfig{}}
	mem := int64(8 << 30)
	tree := NewTree(mgr, TreeConfig{Root: ParseCgroupfs("/test"), PerQOS: true, Pod: PodOptions{EnforceCPULimits: true}, Allocatable: &ResourceConfig{Memory: &mem}})

	g := pod("g", corev1.ResourceRequirements{Requests: rl("cpu", "1", "memory", "1Gi"), Limits: rl("cpu", "1", "memory", "1Gi")})
	b1 := pod("b1", corev1.ResourceRequirements{Requests: rl("cpu", "250m")})
	b2 := pod("b2", corev1.ResourceRequirements{Requests: rl("cpu", "500m")})
	be := pod("be", corev1.ResourceRequirements{})
	for _, p := range []*corev1.Pod{g, b1, b2, be} {
		if _, err := tree.EnsurePod(p); err != nil {
			t.Fatal(err)
		}
	}
	if err := tree.Sync([]*corev1.Pod{g, b1, b2, be}); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"/test/kubepods":                      "mem=8589934592",
		"/test/kubepods/burstable":            "shares=768",
		"/test/kubepods/besteffort":           "shares=2",
		"/test/kubepods/poduid-g":             "shares=1024 quota=100000 mem=1073741824",
		"/test/kubepods/burstable/poduid-b1":  "shares=256",
		"/test/kubepods/burstable/poduid-b2":  "shares=512",
		"/test/kubepods/besteffort/poduid-be": "shares=2",
	}
	for path, w := range want {
		rc, ok := mgr.sets[path]
		if !ok {
			t.Errorf("%s not created", path)
			continue
		}
		if got := describe(rc); got != w {
			t.Errorf("%s = %q, want %q", path, got, w)
		}
	}
	if len(mgr.sets) != len(want) {
		t.Errorf("created %d cgroups, want %d: %v", len(mgr.sets), len(want), mgr.sets)
	}

	found, err := tree.PodCgroups()
	if err != nil || len(found) != 4 || found["uid-b1"].Cgroupfs() != "/test/kubepods/burstable/poduid-b1" {
		t.Errorf("PodCgroups = %v, %v", found, err)
	}

	// Removing a Burstable pod lowers the burstable shares on the next sync.
	if err := tree.RemovePod(found["uid-b2"]); err != nil {
		t.Fatal(err)
	}
	if err := tree.Sync([]*corev1.Pod{g, b1, be}); err != nil {
		t.Fatal(err)
	}
	if got := describe(mgr.sets["/test/kubepods/burstable"]); got != "shares=256" {
		t.Errorf("burstable after removal = %q, want shares=256", got)
	}
	if mgr.Exists(Name{"test", "kubepods", "burstable", "poduid-b2"}) {
		t.Error("removed pod cgroup still present")
	}
}

// A reconcile works from a snapshot of the active pods: one of them may
// have been terminated, its cgroup removed, since. Sync must repair the
// values of the pod cgroups that exist and never re-create a removed one.
func TestSyncFromAStaleListDoesNotRecreateRemovedPodCgroups(t *testing.T) {
	mgr := &memManager{sets: map[string]*ResourceConfig{}}
	tree := NewTree(mgr, TreeConfig{Root: ParseCgroupfs("/test"), PerQOS: true})
	b := pod("b", corev1.ResourceRequirements{Requests: rl("cpu", "250m")})
	be := pod("be", corev1.ResourceRequirements{})
	for _, p := range []*corev1.Pod{b, be} {
		if _, err := tree.EnsurePod(p); err != nil {
			t.Fatal(err)
		}
	}
	snapshot := []*corev1.Pod{b, be}
	if err := tree.RemovePod(Name{"test", "kubepods", "besteffort", "poduid-be"}); err != nil {
		t.Fatal(err)
	}
	drifted := uint64(5)
	mgr.sets["/test/kubepods/burstable/poduid-b"] = &ResourceConfig{CPUShares: &drifted}
	if err := tree.Sync(snapshot); err != nil {
		t.Fatalf("Sync with a removed pod in the list: %v", err)
	}
	if mgr.Exists(Name{"test", "kubepods", "besteffort", "poduid-be"}) {
		t.Error("Sync re-created the removed pod cgroup")
	}
	if got := describe(mgr.sets["/test/kubepods/burstable/poduid-b"]); got != "shares=256" {
		t.Errorf("drifted pod cgroup after Sync = %q, want shares=256", got)
	}
}

func describe(rc *ResourceConfig) string {
	var parts []string
	if rc.CPUShares != nil {
		parts = append(parts, fmt.Sprintf("shares=%d", *rc.CPUShares))
	}
	if rc.CPUQuota != nil {
		parts = append(parts, fmt.Sprintf("quota=%d", *rc.CPUQuota))
	}
	if rc.Memory != nil {
		parts = append(parts, fmt.Sprintf("mem=%d", *rc.Memory))
	}
	return strings.Join(parts, " ")
}
