package cgroups

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"nodeagent/api"
)

// Values are a cgroup's settings and use.
type Values = api.CgroupValues

// Inspect reads a cgroup's values. Files a host lacks read as zero.
func Inspect(m Manager, name Name) (Values, error) {
	v := Values{Name: name.Cgroupfs(), Dir: m.Path(name), CPUQuota: -1, MemoryLimit: -1, PidsLimit: -1}
	mem, err := ReadMemoryStats(m, name)
	if err != nil {
		return v, err
	}
	v.Memory, v.WorkingSet = mem.Usage, mem.WorkingSet()
	if mem.Limit > 0 {
		v.MemoryLimit = int64(mem.Limit)
	}
	dir := func(controller string) string { return v.Dir }
	if m.Version() == 1 {
		// v1 keeps each controller in its own hierarchy, beside memory's.
		root := filepath.Dir(m.Path(Name{}))
		dir = func(controller string) string { return filepath.Join(root, controller, name.Cgroupfs()) }
		v.CPUShares = valueOf(filepath.Join(dir("cpu"), "cpu.shares"))
		v.CPUPeriod = valueOf(filepath.Join(dir("cpu"), "cpu.cfs_period_us"))
		if q, err := strconv.ParseInt(readTrimmed(filepath.Join(dir("cpu"), "cpu.cfs_quota_us")), 10, 64); err == nil && q > 0 {
			v.CPUQuota = q
		}
		v.Pids = valueOf(filepath.Join(dir("pids"), "pids.current"))
	} else {
		v.CPUWeight = valueOf(filepath.Join(v.Dir, "cpu.weight"))
		if f := strings.Fields(readTrimmed(filepath.Join(v.Dir, "cpu.max"))); len(f) == 2 {
			if q, err := strconv.ParseInt(f[0], 10, 64); err == nil {
				v.CPUQuota = q
			}
			v.CPUPeriod, _ = strconv.ParseUint(f[1], 10, 64)
		}
		v.Pids = valueOf(filepath.Join(v.Dir, "pids.current"))
	}
	if l, err := strconv.ParseInt(readTrimmed(filepath.Join(dir("pids"), "pids.max")), 10, 64); err == nil {
		v.PidsLimit = l
	}
	return v, nil
}

func readTrimmed(path string) string {
	b, _ := os.ReadFile(path)
	return strings.TrimSpace(string(b))
}

// valueOf is readUint for files a host may lack: zero then.
func valueOf(path string) uint64 {
	n, _ := ReadUint(path)
	return n
}
