package cgroups

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/containerd/cgroups/v3/cgroup1"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// V1 manages cgroups on the legacy (or hybrid) hierarchy: one directory per
// controller mount. Values are written through containerd/cgroups' cgroup1,
// which creates the cgroup in every mounted controller (copying cpuset.cpus
// and cpuset.mems from the parent).
type V1 struct {
	mountpoint  string
	hierarchies []string // every mount directory (v1 controllers and a hybrid unified one)
}

var _ Manager = (*V1)(nil)

// NewV1 discovers the v1 controller mounts under mountpoint.
func NewV1(mountpoint string) (*V1, error) {
	dirs, err := v1Mounts(mountpoint)
	if err != nil {
		return nil, err
	}
	if len(dirs) == 0 {
		return nil, fmt.Errorf("no cgroup v1 controllers mounted under %s", mountpoint)
	}
	return &V1{mountpoint: mountpoint, hierarchies: dirs}, nil
}

// v1Mounts reads /proc/self/mountinfo for the cgroup mounts under mountpoint.
func v1Mounts(mountpoint string) ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	seen := map[string]bool{}
	s := bufio.NewScanner(f)
	for s.Scan() {
		// "36 25 0:31 / /sys/fs/cgroup/memory rw,... - cgroup cgroup rw,memory"
		fields := strings.Fields(s.Text())
		sep := -1
		for i, f := range fields {
			if f == "-" {
				sep = i
				break
			}
		}
		// cgroup2 too: on hybrid hosts runc also creates the pod's directory
		// in the unified mount, and removal must reach it.
		if sep < 0 || sep+1 >= len(fields) || len(fields) < 5 || (fields[sep+1] != "cgroup" && fields[sep+1] != "cgroup2") {
			continue
		}
		if dir := fields[4]; strings.HasPrefix(dir, mountpoint+"/") {
			seen[dir] = true
		}
	}
	dirs := make([]string, 0, len(seen))
	for d := range seen {
		dirs = append(dirs, d)
	}
	sort.Strings(dirs)
	return dirs, s.Err()
}

// Version implements Manager.
func (m *V1) Version() int { return 1 }

// Path implements Manager.
func (m *V1) Path(name Name) string {
	return filepath.Join(m.mountpoint, "memory", name.Cgroupfs())
}

// FreezerPath is the cgroup's directory in the freezer hierarchy: the
// kill freezes it first.
func (m *V1) FreezerPath(name Name) string {
	return filepath.Join(m.mountpoint, "freezer", name.Cgroupfs())
}

// Set implements Manager.
func (m *V1) Set(name Name, rc *ResourceConfig) error {
	if err := name.Validate(); err != nil {
		return err
	}
	if _, err := cgroup1.New(cgroup1.StaticPath(name.Cgroupfs()), V1Resources(rc)); err != nil {
		return fmt.Errorf("set cgroup %s: %w", name.Cgroupfs(), err)
	}
	return nil
}

// Update implements Manager: cgroup1.Load keeps only the controllers the
// cgroup exists in, and Update writes to those.
func (m *V1) Update(name Name, rc *ResourceConfig) error {
	return updateExisting(m, name, func() error {
		cg, err := cgroup1.Load(cgroup1.StaticPath(name.Cgroupfs()))
		if err != nil {
			return err
		}
		return cg.Update(V1Resources(rc))
	})
}

// V1Resources converts a ResourceConfig to the OCI form cgroup1 writes.
func V1Resources(rc *ResourceConfig) *specs.LinuxResources {
	r := &specs.LinuxResources{}
	if rc == nil {
		return r
	}
	if rc.CPUShares != nil || rc.CPUQuota != nil || rc.CPUPeriod != nil {
		r.CPU = &specs.LinuxCPU{Shares: rc.CPUShares, Quota: rc.CPUQuota, Period: rc.CPUPeriod}
	}
	if rc.Memory != nil {
		r.Memory = &specs.LinuxMemory{Limit: rc.Memory}
	}
	if rc.PidsLimit != nil {
		r.Pids = &specs.LinuxPids{Limit: rc.PidsLimit}
	}
	return r
}

// Exists implements Manager.
func (m *V1) Exists(name Name) bool {
	_, err := os.Stat(m.Path(name))
	return err == nil
}

// Pids implements Manager.
func (m *V1) Pids(name Name) ([]int, error) {
	return readProcs(m.Path(name))
}

// Children implements Manager.
func (m *V1) Children(name Name) ([]string, error) {
	return childDirs(m.Path(name))
}

// Remove implements Manager: the cgroup goes from every controller.
func (m *V1) Remove(name Name) error {
	var errs []error
	for _, h := range m.hierarchies {
		if err := removeTree(filepath.Join(h, name.Cgroupfs())); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("remove cgroup %s: %v", name.Cgroupfs(), errs)
	}
	return nil
}

// CgroupParent implements Manager: the cgroupfs path.
func (m *V1) CgroupParent(name Name) string { return name.Cgroupfs() }

// controllerDir is the mount of the hierarchy a controller is in
// ("cpuacct" may be mounted alone or as "cpu,cpuacct").
func (m *V1) controllerDir(controller string) (string, bool) {
	for _, h := range m.hierarchies {
		for _, c := range strings.Split(filepath.Base(h), ",") {
			if c == controller {
				return h, true
			}
		}
	}
	return "", false
}
