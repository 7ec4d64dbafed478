package cpumanager

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"k8s.io/utils/cpuset"
)

// CPU is one online logical CPU and where it sits.
type CPU struct {
	ID     int
	Core   int // unique on the node: (socket, core_id) numbered in order
	Socket int
	// Uncore is the last-level (L3) cache the CPU shares, its
	// cache/index3/id; the socket where there is none, as the kubelet.
	Uncore int
}

// Topology is the node's online CPUs, sorted by ID, as the kubelet reads
// them through cadvisor (sockets, cores, threads).
type Topology struct {
	CPUs []CPU
}

// ReadTopology reads the online CPUs and their sockets and cores under
// sysfs (normally /sys).
func ReadTopology(sysfs string) (Topology, error) {
	dir := filepath.Join(sysfs, "devices", "system", "cpu")
	online, err := readCPUList(filepath.Join(dir, "online"))
	if err != nil {
		return Topology{}, err
	}
	type key struct{ socket, core int }
	cores := map[key]int{}
	var t Topology
	for _, id := range online.List() {
		top := filepath.Join(dir, fmt.Sprintf("cpu%d", id), "topology")
		socket, err := readInt(filepath.Join(top, "physical_package_id"))
		if err != nil {
			return Topology{}, err
		}
		core, err := readInt(filepath.Join(top, "core_id"))
		if err != nil {
			return Topology{}, err
		}
		uncore, err := readInt(filepath.Join(dir, fmt.Sprintf("cpu%d", id), "cache", "index3", "id"))
		if errors.Is(err, fs.ErrNotExist) {
			uncore = socket
		} else if err != nil {
			return Topology{}, err
		}
		k := key{socket, core}
		n, ok := cores[k]
		if !ok {
			n = len(cores)
			cores[k] = n
		}
		t.CPUs = append(t.CPUs, CPU{ID: id, Core: n, Socket: socket, Uncore: uncore})
	}
	if len(t.CPUs) == 0 {
		return Topology{}, fmt.Errorf("%s lists no CPU", filepath.Join(dir, "online"))
	}
	sort.Slice(t.CPUs, func(i, j int) bool { return t.CPUs[i].ID < t.CPUs[j].ID })
	return t, nil
}

// NUMANodes counts the NUMA nodes under sysfs (normally /sys); 1 where
// the kernel shows none.
func NUMANodes(sysfs string) int {
	nodes, _ := filepath.Glob(filepath.Join(sysfs, "devices", "system", "node", "node[0-9]*"))
	return max(len(nodes), 1)
}

// Sockets counts the sockets.
func (t Topology) Sockets() int {
	sockets := map[int]bool{}
	for _, c := range t.CPUs {
		sockets[c.Socket] = true
	}
	return len(sockets)
}

// Uniform returns a topology of sockets×cores×threads CPUs numbered as
// Linux numbers SMT siblings (the second threads after all first ones).
func Uniform(sockets, coresPerSocket, threadsPerCore int) Topology {
	var t Topology
	cores := sockets * coresPerSocket
	for thread := 0; thread < threadsPerCore; thread++ {
		for core := 0; core < cores; core++ {
			socket := core / coresPerSocket
			t.CPUs = append(t.CPUs, CPU{ID: thread*cores + core, Core: core, Socket: socket, Uncore: socket})
		}
	}
	sort.Slice(t.CPUs, func(i, j int) bool { return t.CPUs[i].ID < t.CPUs[j].ID })
	return t
}

// All is every online CPU.
func (t Topology) All() cpuset.CPUSet {
	ids := make([]int, len(t.CPUs))
	for i, c := range t.CPUs {
		ids[i] = c.ID
	}
	return cpuset.New(ids...)
}

// CoresOf is every CPU of the cores that hold a CPU of set.
func (t Topology) CoresOf(set cpuset.CPUSet) cpuset.CPUSet {
	cores := map[int]bool{}
	for _, c := range t.CPUs {
		if set.Contains(c.ID) {
			cores[c.Core] = true
		}
	}
	var ids []int
	for _, c := range t.CPUs {
		if cores[c.Core] {
			ids = append(ids, c.ID)
		}
	}
	return cpuset.New(ids...)
}

// CPUsPerCore is the threads of a core (1 without SMT).
func (t Topology) CPUsPerCore() int {
	return t.per(func(c CPU) int { return c.Core })
}

// SameUncore reports whether every CPU of set shares one uncore cache.
func (t Topology) SameUncore(set cpuset.CPUSet) bool {
	uncores := map[int]bool{}
	for _, c := range t.CPUs {
		if set.Contains(c.ID) {
			uncores[c.Uncore] = true
		}
	}
	return len(uncores) <= 1
}

// CPUsPerUncore is the logical CPUs of an uncore cache.
func (t Topology) CPUsPerUncore() int {
	return t.per(func(c CPU) int { return c.Uncore })
}

// CPUsPerSocket is the logical CPUs of a socket.
func (t Topology) CPUsPerSocket() int {
	return t.per(func(c CPU) int { return c.Socket })
}

func (t Topology) per(group func(CPU) int) int {
	groups := map[int]bool{}
	for _, c := range t.CPUs {
		groups[group(c)] = true
	}
	if len(groups) == 0 {
		return 0
	}
	return len(t.CPUs) / len(groups)
}

func readCPUList(path string) (cpuset.CPUSet, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return cpuset.CPUSet{}, err
	}
	s, err := cpuset.Parse(strings.TrimSpace(string(b)))
	if err != nil {
		return cpuset.CPUSet{}, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

func readInt(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	return n, nil
}
