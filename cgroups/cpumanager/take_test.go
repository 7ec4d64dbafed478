package cpumanager

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"k8s.io/utils/cpuset"
)

func TestTakePacksAsTheKubelet(t *testing.T) {
	// 2 sockets × 4 cores × 2 threads: CPU n and n+8 are siblings.
	smt := Uniform(2, 4, 2)
	for _, tc := range []struct {
		name  string
		topo  Topology
		avail string
		n     int
		want  string
	}{
		{"one CPU of a plain node is the lowest", Uniform(1, 2, 1), "1", 1, "1"},
		{"lowest free first", Uniform(1, 4, 1), "0-3", 2, "0-1"},
		{"a whole socket when the request covers one", smt, "0-15", 8, "0-3,8-11"},
		{"whole cores before threads", smt, "0-15", 2, "0,8"},
		{"a half-used core is filled first", smt, "1-15", 1, "8"},
		{"the socket with fewer free CPUs is used first", smt, "1-3,5-11,13-15", 2, "5,13"},
		{"a socket and a core", smt, "0-15", 10, "0-4,8-12"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := take(tc.topo, mustParse(t, tc.avail), tc.n, false)
			if err != nil {
				t.Fatal(err)
			}
			if got.String() != tc.want {
				t.Fatalf("take %d of %s = %s, want %s", tc.n, tc.avail, got, tc.want)
			}
		})
	}
}

func TestTakeRefusesMoreThanAvailable(t *testing.T) {
	_, err := take(Uniform(1, 2, 1), cpuset.New(1), 2, false)
	if err == nil || !strings.Contains(err.Error(), "not enough cpus available to satisfy request: requested=2, available=1") {
		t.Fatalf("err = %v", err)
	}
}

func mustParse(t *testing.T, s string) cpuset.CPUSet {
	t.Helper()
	set, err := cpuset.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return set
}

// split is one socket of 8 single-thread cores over two last-level caches
// (0-3 and 4-7), as a chiplet CPU.
func split() Topology {
	t := Uniform(1, 8, 1)
	for i := range t.CPUs {
		t.CPUs[i].Uncore = t.CPUs[i].ID / 4
	}
	return t
}

// TestTakeByUncoreCacheAsTheKubelet: prefer-align-cpus-by-uncorecache takes
// a whole free cache when the request covers one, else the cache with the
// fewest free CPUs that holds the request; plain packing crosses caches.
func TestTakeByUncoreCacheAsTheKubelet(t *testing.T) {
	for _, tc := range []struct {
		name     string
		avail    string
		n        int
		byUncore bool
		want     string
	}{
		{"packing alone crosses the caches", "1-7", 4, false, "1-4"},
		{"a whole free cache", "1-7", 4, true, "4-7"},
		{"the fuller cache that holds the request", "1-7", 3, true, "1-3"},
		{"the emptier cache when the fuller cannot", "2-7", 3, true, "4-6"},
		{"more than a cache: whole caches, then packing", "0-7", 6, true, "0-5"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := take(split(), mustParse(t, tc.avail), tc.n, tc.byUncore)
			if err != nil {
				t.Fatal(err)
			}
			if got.String() != tc.want {
				t.Fatalf("take %d of %s = %s, want %s", tc.n, tc.avail, got, tc.want)
			}
		})
	}
}

// TestReadTopologyReadsUncoreCaches: the L3 cache id where sysfs has one,
// the socket where it has none (the kubelet's fallback).
func TestReadTopologyReadsUncoreCaches(t *testing.T) {
	root := t.TempDir()
	cpu := filepath.Join(root, "devices", "system", "cpu")
	write := func(path, body string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(body+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(cpu, "online"), "0-2")
	for id, l3 := range []string{"7", "9", ""} {
		dir := filepath.Join(cpu, "cpu"+strconv.Itoa(id))
		write(filepath.Join(dir, "topology", "physical_package_id"), "1")
		write(filepath.Join(dir, "topology", "core_id"), strconv.Itoa(id))
		if l3 != "" {
			write(filepath.Join(dir, "cache", "index3", "id"), l3)
		}
	}
	topo, err := ReadTopology(root)
	if err != nil {
		t.Fatal(err)
	}
	var got []int
	for _, c := range topo.CPUs {
		got = append(got, c.Uncore)
	}
	if fmt.Sprint(got) != "[7 9 1]" {
		t.Fatalf("uncore caches %v, want [7 9 1]", got)
	}
}

// TestNUMANodesCountsSysfsNodes: the nodes sysfs lists, 1 where it lists
// none (a kernel without NUMA).
func TestNUMANodesCountsSysfsNodes(t *testing.T) {
	root := t.TempDir()
	if n := NUMANodes(root); n != 1 {
		t.Fatalf("no node directory: %d NUMA nodes, want 1", n)
	}
	for _, d := range []string{"node0", "node1", "possible"} {
		if err := os.MkdirAll(filepath.Join(root, "devices", "system", "node", d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if n := NUMANodes(root); n != 2 {
		t.Fatalf("%d NUMA nodes, want 2", n)
	}
	if s := Uniform(2, 2, 1).Sockets(); s != 2 {
		t.Fatalf("%d sockets, want 2", s)
	}
}
