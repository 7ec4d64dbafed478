package cgroups

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestV2ResourcesConversion(t *testing.T) {
	shares, quota, period, mem, pids := uint64(1024), int64(50000), uint64(100000), int64(256<<20), int64(100)
	r := V2Resources(&ResourceConfig{CPUShares: &shares, CPUQuota: &quota, CPUPeriod: &period, Memory: &mem, PidsLimit: &pids})
	if *r.CPU.Weight != 39 || r.CPU.Max != "50000 100000" || *r.Memory.Max != 256<<20 || r.Pids.Max != 100 {
		t.Errorf("got weight %d max %q memory %d pids %d", *r.CPU.Weight, r.CPU.Max, *r.Memory.Max, r.Pids.Max)
	}
	unlimited := int64(-1)
	r = V2Resources(&ResourceConfig{CPUQuota: &unlimited, CPUPeriod: &period})
	if r.CPU.Max != "max 100000" || r.CPU.Weight != nil || r.Memory != nil || r.Pids != nil {
		t.Errorf("unlimited quota: max %q weight %v memory %v pids %v", r.CPU.Max, r.CPU.Weight, r.Memory, r.Pids)
	}
	if r := V2Resources(&ResourceConfig{}); r.CPU != nil || r.Memory != nil {
		t.Error("empty config must write nothing")
	}
}

// fakeUnified lays out directories with the control files the kernel would
// create, so the v2 manager's writes can be read back.
func fakeUnified(t *testing.T, groups ...string) string {
	t.Helper()
	root := t.TempDir()
	for _, g := range append([]string{""}, groups...) {
		dir := filepath.Join(root, g)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{"cgroup.subtree_control", "cgroup.procs"} {
			if err := os.WriteFile(filepath.Join(dir, f), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	return root
}

func TestV2ManagerWritesValues(t *testing.T) {
	root := fakeUnified(t, "kubepods", "kubepods/burstable", "kubepods/burstable/podabc")
	m := NewV2(root)
	pod := Name{"kubepods", "burstable", "podabc"}
	shares, quota, period, mem := uint64(512), int64(20000), uint64(100000), int64(64<<20)
	if err := m.Set(pod, &ResourceConfig{CPUShares: &shares, CPUQuota: &quota, CPUPeriod: &period, Memory: &mem}); err != nil {
		t.Fatal(err)
	}
	read := func(rel string) string {
		b, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	if got := read("kubepods/burstable/podabc/cpu.weight"); got != "20" {
		t.Errorf("cpu.weight = %q, want 20", got)
	}
	if got := read("kubepods/burstable/podabc/cpu.max"); got != "20000 100000" {
		t.Errorf("cpu.max = %q", got)
	}
	if got := read("kubepods/burstable/podabc/memory.max"); got != "67108864" {
		t.Errorf("memory.max = %q", got)
	}
	if got := read("kubepods/cgroup.subtree_control"); !strings.Contains(got, "+cpu") || !strings.Contains(got, "+memory") {
		t.Errorf("controllers not enabled in parent: %q", got)
	}
	if !m.Exists(pod) {
		t.Error("Exists = false after Set")
	}
	children, err := m.Children(Name{"kubepods", "burstable"})
	if err != nil || len(children) != 1 || children[0] != "podabc" {
		t.Errorf("Children = %v, %v", children, err)
	}
	if err := os.WriteFile(filepath.Join(root, "kubepods/burstable/podabc/cgroup.procs"), []byte("12\n34\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	pids, err := m.Pids(Name{"kubepods"})
	if err != nil || len(pids) != 2 || pids[0] != 12 || pids[1] != 34 {
		t.Errorf("Pids = %v, %v", pids, err)
	}
}
