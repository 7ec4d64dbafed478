package cpumanager

import (
	"fmt"
	"slices"
	"sort"

	"k8s.io/utils/cpuset"
)

// Reserve picks the n CPUs the static policy keeps for the system when
// reservedSystemCPUs is unset, as the kubelet does: by topology from all.
func Reserve(t Topology, n int) (cpuset.CPUSet, error) { return take(t, t.All(), n, false) }

// take picks n CPUs of avail packed, as the kubelet's static policy does
// (takeByTopologyNUMAPacked): whole free sockets while n covers one, then
// whole free cores while n covers one, then single CPUs from the sockets
// and cores with the fewest free CPUs first, so that big free blocks stay
// whole for later requests. Ties go to the lowest ID. byUncore
// (prefer-align-cpus-by-uncorecache) puts the kubelet's uncore step
// between sockets and cores (takeUncoreCache).
func take(t Topology, avail cpuset.CPUSet, n int, byUncore bool) (cpuset.CPUSet, error) {
	if n <= 0 {
		return cpuset.New(), nil
	}
	if avail.Size() < n {
		return cpuset.New(), fmt.Errorf("not enough cpus available to satisfy request: requested=%d, available=%d", n, avail.Size())
	}
	acc := accumulator{topo: t, avail: avail, need: n, result: cpuset.New()}
	perSocket, perCore := t.CPUsPerSocket(), t.CPUsPerCore()
	for _, socket := range acc.sorted(func(c CPU) int { return c.Socket }) {
		if acc.need >= perSocket && acc.free(func(c CPU) bool { return c.Socket == socket }, perSocket) {
			acc.takeWhere(func(c CPU) bool { return c.Socket == socket })
		}
	}
	if byUncore {
		acc.takeUncore()
	}
	for _, core := range acc.cores() {
		if acc.need >= perCore && acc.free(func(c CPU) bool { return c.Core == core }, perCore) {
			acc.takeWhere(func(c CPU) bool { return c.Core == core })
		}
	}
	for _, core := range acc.cores() {
		for _, c := range t.CPUs {
			if acc.need > 0 && c.Core == core && acc.avail.Contains(c.ID) {
				acc.takeWhere(func(o CPU) bool { return o.ID == c.ID })
			}
		}
	}
	return acc.result, nil
}

// takeUncore is the kubelet's takeUncoreCache: uncore caches with the
// fewest free CPUs first, whole free ones while the need covers one, else
// the first cores (by ID) of one cache with free CPUs when they hold
// exactly what is needed, an odd need on SMT leaving the last thread.
func (a *accumulator) takeUncore() {
	per, perCore := a.topo.CPUsPerUncore(), a.topo.CPUsPerCore()
	for _, uncore := range a.sorted(func(c CPU) int { return c.Uncore }) {
		if a.need <= 0 {
			return
		}
		if a.need >= per {
			for _, whole := range a.sorted(func(c CPU) int { return c.Uncore }) {
				if a.need >= per && a.free(func(c CPU) bool { return c.Uncore == whole }, per) {
					a.takeWhere(func(c CPU) bool { return c.Uncore == whole })
				}
			}
			if a.need <= 0 {
				return
			}
		}
		var cores []int
		for _, c := range a.topo.CPUs {
			if c.Uncore == uncore && a.avail.Contains(c.ID) && !slices.Contains(cores, c.Core) {
				cores = append(cores, c.Core)
			}
		}
		slices.Sort(cores)
		cores = cores[:min(len(cores), (a.need+perCore-1)/perCore)]
		var ids []int
		for _, c := range a.topo.CPUs {
			if slices.Contains(cores, c.Core) && a.avail.Contains(c.ID) {
				ids = append(ids, c.ID)
			}
		}
		slices.Sort(ids)
		if a.need%2 != 0 && perCore > 1 && len(ids) > a.need {
			ids = ids[:len(ids)-1]
		}
		if len(ids) == a.need {
			a.takeWhere(func(c CPU) bool { return slices.Contains(ids, c.ID) })
		}
	}
}

type accumulator struct {
	topo   Topology
	avail  cpuset.CPUSet // still free
	need   int
	result cpuset.CPUSet
}

// sorted lists the groups (sockets or cores) that have free CPUs, fewest
// free first, then by ID.
func (a *accumulator) sorted(group func(CPU) int) []int {
	free := map[int]int{}
	for _, c := range a.topo.CPUs {
		if a.avail.Contains(c.ID) {
			free[group(c)]++
		}
	}
	ids := make([]int, 0, len(free))
	for id := range free {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool {
		if free[ids[i]] != free[ids[j]] {
			return free[ids[i]] < free[ids[j]]
		}
		return ids[i] < ids[j]
	})
	return ids
}

// cores lists the cores with free CPUs, socket by socket in sorted order.
func (a *accumulator) cores() []int {
	var out []int
	for _, socket := range a.sorted(func(c CPU) int { return c.Socket }) {
		for _, core := range a.sorted(func(c CPU) int { return c.Core }) {
			if a.socketOf(core) == socket {
				out = append(out, core)
			}
		}
	}
	return out
}

func (a *accumulator) socketOf(core int) int {
	for _, c := range a.topo.CPUs {
		if c.Core == core {
			return c.Socket
		}
	}
	return -1
}

// free reports whether all size CPUs matching in are still free.
func (a *accumulator) free(in func(CPU) bool, size int) bool {
	n := 0
	for _, c := range a.topo.CPUs {
		if in(c) && a.avail.Contains(c.ID) {
			n++
		}
	}
	return n == size
}

func (a *accumulator) takeWhere(in func(CPU) bool) {
	var ids []int
	for _, c := range a.topo.CPUs {
		if in(c) && a.avail.Contains(c.ID) {
			ids = append(ids, c.ID)
		}
	}
	got := cpuset.New(ids...)
	a.result = a.result.Union(got)
	a.avail = a.avail.Difference(got)
	a.need -= got.Size()
}
