//go:build integration

package cgroups

import (
	"errors"
	"io/fs"
	"os"
	"strconv"
	"testing"
)

// TestUpdateLive runs on the host's real hierarchy (v1 in `make
// integration`, v2 in the VM lane): Update rewrites an existing cgroup's
// values, and on a removed cgroup it fails with fs.ErrNotExist and leaves
// nothing behind, where Set would create the cgroup again.
func TestUpdateLive(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("needs root to create cgroups (make test runs as root)")
	}
	m, err := NewManager("cgroupfs")
	if err != nil {
		t.Fatal(err)
	}
	name := Name{"nodeagent-update-test-" + strconv.Itoa(os.Getpid())}
	limit, shares := int64(64<<20), uint64(512)
	if err := m.Set(name, &ResourceConfig{Memory: &limit, CPUShares: &shares}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Remove(name) })

	limit, shares = 32<<20, 256
	if err := m.Update(name, &ResourceConfig{Memory: &limit, CPUShares: &shares}); err != nil {
		t.Fatalf("Update of an existing cgroup: %v", err)
	}
	v, err := Inspect(m, name)
	if err != nil {
		t.Fatal(err)
	}
	wantCPU := shares
	got := v.CPUShares
	if m.Version() == 2 {
		wantCPU, got = SharesToWeight(shares), v.CPUWeight
	}
	if v.MemoryLimit != limit || got != wantCPU {
		t.Errorf("after Update: memory limit %d, cpu %d; want %d, %d", v.MemoryLimit, got, limit, wantCPU)
	}

	if err := m.Remove(name); err != nil {
		t.Fatal(err)
	}
	err = m.Update(name, &ResourceConfig{Memory: &limit})
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Update of a removed cgroup = %v, want fs.ErrNotExist", err)
	}
	if m.Exists(name) {
		t.Error("Update brought the removed cgroup back")
	}
}
