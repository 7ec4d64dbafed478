package cgroups

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// MemoryStats is one reading of a memory cgroup, in the kubelet's terms.
type MemoryStats struct {
	Usage        uint64 // v1 memory.usage_in_bytes, v2 memory.current
	InactiveFile uint64 // memory.stat: v1 total_inactive_file, v2 inactive_file
	Limit        uint64 // 0 when unlimited
	// OOMEvents counts allocations that hit the limit and invoked the OOM
	// killer (v2 memory.events "oom"; v1 has no such counter and reports
	// OOMKills). OOMKills counts processes it killed.
	OOMEvents uint64
	OOMKills  uint64
	// Pressure is the cgroup's memory PSI (v2 memory.pressure); nil on v1
	// or when the kernel has no PSI.
	Pressure *Pressure
}

// WorkingSet is usage minus inactive file cache, the kubelet's
// memory.available basis.
func (s MemoryStats) WorkingSet() uint64 {
	if s.InactiveFile > s.Usage {
		return 0
	}
	return s.Usage - s.InactiveFile
}

// Pressure is a PSI reading: the share of time some (or all) tasks stalled.
type Pressure struct {
	Some, Full PressureLine
}

// PressureLine is one line of a PSI file; averages are percentages and
// Total is the accumulated stall time in microseconds.
type PressureLine struct {
	Avg10, Avg60, Avg300 float64
	Total                uint64
}

// ReadMemoryStats reads the memory cgroup of name. The root cgroup ({}) on
// v2 has no memory.current; its usage comes from /proc/meminfo, as runc and
// cadvisor do.
func ReadMemoryStats(m Manager, name Name) (MemoryStats, error) {
	return readMemoryStats(m.Version(), m.Path(name), len(name) == 0, "/proc/meminfo")
}

func readMemoryStats(version int, dir string, root bool, meminfo string) (MemoryStats, error) {
	var s MemoryStats
	stat, err := ReadFlatKeyed(filepath.Join(dir, "memory.stat"))
	if err != nil {
		return s, err
	}
	if version == 1 {
		if s.Usage, err = ReadUint(filepath.Join(dir, "memory.usage_in_bytes")); err != nil {
			return s, err
		}
		s.InactiveFile = stat["total_inactive_file"]
		if !root {
			if s.Limit, err = ReadUint(filepath.Join(dir, "memory.limit_in_bytes")); err != nil {
				return s, err
			}
			// v1 reports "unlimited" as a page-aligned LONG_MAX.
			if s.Limit >= math.MaxInt64-1<<16 {
				s.Limit = 0
			}
		}
		control, err := ReadFlatKeyed(filepath.Join(dir, "memory.oom_control"))
		if err != nil {
			return s, err
		}
		s.OOMKills = control["oom_kill"]
		return s, nil
	}

	s.InactiveFile = stat["inactive_file"]
	if root {
		mi, err := ReadFlatKeyed(meminfo)
		if err != nil {
			return s, err
		}
		// meminfo is in kB; usage as runc computes it for the root.
		s.Usage = (mi["MemTotal:"] - mi["MemFree:"]) * 1024
		if _, ok := stat["inactive_file"]; !ok {
			s.InactiveFile = mi["Inactive(file):"] * 1024
		}
	} else {
		if s.Usage, err = ReadUint(filepath.Join(dir, "memory.current")); err != nil {
			return s, err
		}
		if s.Limit, err = ReadUint(filepath.Join(dir, "memory.max")); err != nil {
			return s, err
		}
		events, err := ReadFlatKeyed(filepath.Join(dir, "memory.events"))
		if err != nil {
			return s, err
		}
		s.OOMEvents, s.OOMKills = events["oom"], events["oom_kill"]
	}
	p, err := ReadPressure(filepath.Join(dir, "memory.pressure"))
	if err == nil {
		s.Pressure = p
	} else if !errors.Is(err, os.ErrNotExist) && !errors.Is(err, errPSIDisabled) {
		return s, err
	}
	return s, nil
}

var errPSIDisabled = errors.New("PSI disabled")

// ReadPressure parses a PSI file (memory.pressure, /proc/pressure/memory).
func ReadPressure(path string) (*Pressure, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		// Kernels built with PSI but booted with psi=0 answer EOPNOTSUPP.
		if strings.Contains(err.Error(), "not supported") {
			return nil, errPSIDisabled
		}
		return nil, err
	}
	p, err := ParsePressure(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return p, nil
}

// ParsePressure parses PSI lines ("some avg10=0.00 avg60=0.00 avg300=0.00
// total=0", and "full ..."). Averages are percentages: anything but a
// finite value in [0, 100] is refused.
func ParsePressure(b []byte) (*Pressure, error) {
	var p Pressure
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		var dst *PressureLine
		switch fields[0] {
		case "some":
			dst = &p.Some
		case "full":
			dst = &p.Full
		default:
			return nil, fmt.Errorf("unexpected line %q", line)
		}
		for _, f := range fields[1:] {
			k, v, ok := strings.Cut(f, "=")
			if !ok {
				return nil, fmt.Errorf("unexpected field %q", f)
			}
			var err error
			switch k {
			case "avg10":
				dst.Avg10, err = parsePercent(v)
			case "avg60":
				dst.Avg60, err = parsePercent(v)
			case "avg300":
				dst.Avg300, err = parsePercent(v)
			case "total":
				dst.Total, err = strconv.ParseUint(v, 10, 64)
			}
			if err != nil {
				return nil, fmt.Errorf("field %q: %w", f, err)
			}
		}
	}
	return &p, nil
}

func parsePercent(v string) (float64, error) {
	f, err := strconv.ParseFloat(v, 64)
	if err != nil {
		return 0, err
	}
	if math.IsNaN(f) || f < 0 || f > 100 {
		return 0, fmt.Errorf("%q is not a percentage", v)
	}
	return f, nil
}

// ReadUint reads a single-value cgroup file; "max" is 0 (unlimited).
func ReadUint(path string) (uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	v := strings.TrimSpace(string(b))
	if v == "max" {
		return 0, nil
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	return n, nil
}

// ReadFlatKeyed reads "key value [unit]" lines (memory.stat, memory.events,
// memory.oom_control, /proc/meminfo); unparsable values are skipped.
func ReadFlatKeyed(path string) (map[string]uint64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out, err := ParseFlatKeyed(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return out, nil
}

// ParseFlatKeyed parses "key value [unit]" lines; unparsable values are
// skipped. A line over 64 KiB is an error (bufio.ErrTooLong).
func ParseFlatKeyed(r io.Reader) (map[string]uint64, error) {
	out := map[string]uint64{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 {
			continue
		}
		if n, err := strconv.ParseUint(fields[1], 10, 64); err == nil {
			out[fields[0]] = n
		}
	}
	return out, sc.Err()
}

// CPUUsage reads the cumulative CPU time, in ns, of the cgroup cadvisor
// names name ("/" for the node): the counter behind cadvisor's
// Cpu.Usage.Total (v1 cpuacct.usage, v2 cpu.stat usage_usec), one small
// file where a cadvisor reading opens dozens.
func CPUUsage(m Manager, name string) (uint64, error) {
	if v1, ok := m.(*V1); ok {
		dir, ok := v1.controllerDir("cpuacct")
		if !ok {
			return 0, fmt.Errorf("no cpuacct hierarchy is mounted")
		}
		return ReadUint(filepath.Join(dir, name, "cpuacct.usage"))
	}
	path := filepath.Join(m.Path(Name{}), name, "cpu.stat")
	kv, err := ReadFlatKeyed(path)
	if err != nil {
		return 0, err
	}
	usec, ok := kv["usage_usec"]
	if !ok {
		return 0, fmt.Errorf("%s: no usage_usec", path)
	}
	return usec * 1000, nil
}
