package cgroups

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/containerd/cgroups/v3/cgroup2"
)

// V2 manages cgroups on the unified hierarchy through containerd/cgroups'
// cgroup2, which enables the needed controllers in every ancestor's
// cgroup.subtree_control.
type V2 struct {
	mountpoint string
}

var _ Manager = (*V2)(nil)

// NewV2 returns a manager for the unified hierarchy mounted at mountpoint.
func NewV2(mountpoint string) *V2 { return &V2{mountpoint: mountpoint} }

// Version implements Manager.
func (m *V2) Version() int { return 2 }

// Path implements Manager.
func (m *V2) Path(name Name) string { return filepath.Join(m.mountpoint, name.Cgroupfs()) }

// Set implements Manager.
func (m *V2) Set(name Name, rc *ResourceConfig) error {
	if err := name.Validate(); err != nil {
		return err
	}
	if _, err := cgroup2.NewManager(m.mountpoint, name.Cgroupfs(), V2Resources(rc)); err != nil {
		return fmt.Errorf("set cgroup %s: %w", name.Cgroupfs(), err)
	}
	return nil
}

// Update implements Manager.
func (m *V2) Update(name Name, rc *ResourceConfig) error {
	return updateExisting(m, name, func() error {
		cg, err := cgroup2.Load(name.Cgroupfs(), cgroup2.WithMountpoint(m.mountpoint))
		if err != nil {
			return err
		}
		return cg.Update(V2Resources(rc))
	})
}

// V2Resources converts a ResourceConfig to unified-hierarchy values:
// cpu.weight from shares (kubelet's linear mapping), cpu.max "quota period"
// ("max period" when unlimited), memory.max and pids.max.
func V2Resources(rc *ResourceConfig) *cgroup2.Resources {
	r := &cgroup2.Resources{}
	if rc == nil {
		return r
	}
	if rc.CPUShares != nil || rc.CPUQuota != nil || rc.CPUPeriod != nil {
		r.CPU = &cgroup2.CPU{}
		if rc.CPUShares != nil {
			w := SharesToWeight(*rc.CPUShares)
			r.CPU.Weight = &w
		}
		if rc.CPUQuota != nil || rc.CPUPeriod != nil {
			quota := rc.CPUQuota
			if quota != nil && *quota <= 0 {
				quota = nil // "max"
			}
			r.CPU.Max = cgroup2.NewCPUMax(quota, rc.CPUPeriod)
		}
	}
	if rc.Memory != nil && *rc.Memory > 0 {
		r.Memory = &cgroup2.Memory{Max: rc.Memory}
	}
	if rc.MemoryMin != nil && *rc.MemoryMin >= 0 {
		if r.Memory == nil {
			r.Memory = &cgroup2.Memory{}
		}
		r.Memory.Min = rc.MemoryMin
	}
	if rc.MemoryLow != nil && *rc.MemoryLow >= 0 {
		if r.Memory == nil {
			r.Memory = &cgroup2.Memory{}
		}
		r.Memory.Low = rc.MemoryLow
	}
	if rc.PidsLimit != nil && *rc.PidsLimit > 0 {
		r.Pids = &cgroup2.Pids{Max: *rc.PidsLimit}
	}
	return r
}

// Exists implements Manager.
func (m *V2) Exists(name Name) bool {
	_, err := os.Stat(m.Path(name))
	return err == nil
}

// Pids implements Manager.
func (m *V2) Pids(name Name) ([]int, error) { return readProcs(m.Path(name)) }

// Children implements Manager.
func (m *V2) Children(name Name) ([]string, error) { return childDirs(m.Path(name)) }

// Remove implements Manager.
func (m *V2) Remove(name Name) error { return removeTree(m.Path(name)) }

// CgroupParent implements Manager: the cgroupfs path.
func (m *V2) CgroupParent(name Name) string { return name.Cgroupfs() }

// WriteMemoryHigh writes memory.high of a cgroup v2 directory: bytes, or
// "max" for -1.
func WriteMemoryHigh(dir string, bytes int64) error {
	v := "max"
	if bytes >= 0 {
		v = strconv.FormatInt(bytes, 10)
	}
	if err := os.WriteFile(filepath.Join(dir, "memory.high"), []byte(v), 0o644); err != nil {
		return fmt.Errorf("set memory.high of %s: %w", dir, err)
	}
	return nil
}

// MemoryHighSetter says how memory.high is set on m's cgroups (a directory
// as m.Path gives it; -1 is "max"). Under the systemd driver it is the
// slice's MemoryHigh property: systemd rewrites every attribute of a slice
// it manages from the unit's properties whenever it realizes the slice
// again (a pod slice started or stopped below it), and a value written to
// the file behind its back would be lost then.
func MemoryHighSetter(m Manager) func(dir string, bytes int64) error {
	if s, ok := m.(*Systemd); ok {
		return s.setMemoryHigh
	}
	return WriteMemoryHigh
}
