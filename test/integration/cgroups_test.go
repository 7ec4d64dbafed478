//go:build integration

package integration

import (
	"sync"
	"testing"

	"nodeagent/cgroups"
)

// The harness reads cgroups through the cgroups package, as the agent
// does, so the same assertions hold on cgroup v1 and v2: a test names a
// cgroup by its cgroupfs path and compares values, never files.

var hostCgroups = sync.OnceValues(func() (cgroups.Manager, error) { return cgroups.NewManager("cgroupfs") })

func cgroupManager(t *testing.T) cgroups.Manager {
	t.Helper()
	m, err := hostCgroups()
	if err != nil {
		t.Fatalf("read the host's cgroups: %v", err)
	}
	return m
}

// cgroupValues are a cgroup's values: CPU, memory, pids.
func cgroupValues(t *testing.T, path string) cgroups.Values {
	t.Helper()
	v, err := cgroups.Inspect(cgroupManager(t), cgroups.ParseCgroupfs(path))
	if err != nil {
		t.Fatalf("cgroup %s: %v", path, err)
	}
	return v
}

// cgroupExists reports whether the cgroup exists (in any controller).
func cgroupExists(t *testing.T, path string) bool {
	return cgroupManager(t).Exists(cgroups.ParseCgroupfs(path))
}

// cgroupPids lists the processes in a cgroup and its descendants.
func cgroupPids(t *testing.T, path string) []int {
	t.Helper()
	pids, err := cgroupManager(t).Pids(cgroups.ParseCgroupfs(path))
	if err != nil {
		t.Fatalf("processes of cgroup %s: %v", path, err)
	}
	return pids
}

// cgroupMemory is a cgroup's memory statistics.
func cgroupMemory(t *testing.T, path string) cgroups.MemoryStats {
	t.Helper()
	st, err := cgroups.ReadMemoryStats(cgroupManager(t), cgroups.ParseCgroupfs(path))
	if err != nil {
		t.Fatalf("memory of cgroup %s: %v", path, err)
	}
	return st
}

// cpuWeight is a cgroup's CPU weight in the host's terms: cpu.shares on
// v1, cpu.weight on v2; wantCPUWeight turns the kubelet's shares into it.
func cpuWeight(v cgroups.Values) uint64 {
	if v.CPUWeight != 0 {
		return v.CPUWeight
	}
	return v.CPUShares
}

func wantCPUWeight(t *testing.T, shares uint64) uint64 {
	if cgroupManager(t).Version() == 2 {
		return cgroups.SharesToWeight(shares)
	}
	return shares
}

// unlimitedMemory: no memory limit (v1 reads a huge page-aligned number,
// v2 "max").
func unlimitedMemory(v cgroups.Values) bool { return v.MemoryLimit < 0 || v.MemoryLimit >= 1<<62 }
