package cgroups

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	cgroupsv3 "github.com/containerd/cgroups/v3"
	"golang.org/x/sys/unix"
)

// Manager writes cgroup values for one hierarchy version and driver. All
// methods are idempotent and safe for concurrent use on different names.
type Manager interface {
	// Set creates the cgroup when missing (in every controller) and writes rc.
	Set(name Name, rc *ResourceConfig) error
	// Update writes rc to an existing cgroup and never creates one: a
	// missing cgroup is an error wrapping fs.ErrNotExist. Periodic
	// rewrites use it, so a stale pod list cannot bring back a cgroup a
	// terminating pod just removed.
	Update(name Name, rc *ResourceConfig) error
	// Exists reports whether the cgroup exists.
	Exists(name Name) bool
	// Pids lists the processes in the cgroup and all its descendants.
	Pids(name Name) ([]int, error)
	// Children lists the base names of the cgroup's direct children.
	Children(name Name) ([]string, error)
	// Remove deletes the cgroup and its descendants; a missing cgroup is
	// success. It fails while processes remain.
	Remove(name Name) error
	// Path is the cgroup's directory in the memory hierarchy, for display.
	Path(name Name) string
	// CgroupParent is how the runtime is told to place containers under
	// the cgroup: a cgroupfs path, or a systemd slice name.
	CgroupParent(name Name) string
	// Version is 1 or 2.
	Version() int
}

// DefaultMountpoint is where cgroup hierarchies are mounted.
const DefaultMountpoint = "/sys/fs/cgroup"

// Mode reports the host's cgroup layout: "v1" (legacy or hybrid) or "v2"
// (unified). It is decided once, with containerd/cgroups' Mode().
func Mode() string {
	switch cgroupsv3.Mode() {
	case cgroupsv3.Unified:
		return "v2"
	case cgroupsv3.Unavailable:
		return "unavailable"
	}
	return "v1"
}

// NewManager returns the manager for the host's hierarchy and driver
// (cgroupfs, or systemd on the unified hierarchy).
func NewManager(driver string) (Manager, error) {
	switch driver {
	case "", "cgroupfs":
	case "systemd":
		if Mode() != "v2" {
			return nil, errors.New("the systemd cgroup driver is supported on cgroup v2 (unified) hosts only: use cgroupDriver: cgroupfs")
		}
		return NewSystemd(DefaultMountpoint)
	default:
		return nil, fmt.Errorf("unknown cgroup driver %q: want cgroupfs or systemd", driver)
	}
	switch Mode() {
	case "v2":
		return NewV2(DefaultMountpoint), nil
	case "v1":
		return NewV1(DefaultMountpoint)
	}
	return nil, errors.New("no cgroup filesystem mounted at " + DefaultMountpoint)
}

// missing is Update's error for a cgroup that does not exist.
func missing(name Name) error {
	return fmt.Errorf("cgroup %s: %w", name.Cgroupfs(), fs.ErrNotExist)
}

// updateExisting is every manager's Update: write runs only on a cgroup
// that exists, and a write that failed because the cgroup went meanwhile
// is reported as missing too.
func updateExisting(m Manager, name Name, write func() error) error {
	if err := name.Validate(); err != nil {
		return err
	}
	if !m.Exists(name) {
		return missing(name)
	}
	if err := write(); err != nil {
		if !m.Exists(name) {
			return missing(name)
		}
		return fmt.Errorf("update cgroup %s: %w", name.Cgroupfs(), err)
	}
	return nil
}

// readProcs collects cgroup.procs of dir and, recursively, its children.
func readProcs(dir string) ([]int, error) {
	var pids []int
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return nil
			}
			return err
		}
		if !d.IsDir() {
			return nil
		}
		b, err := os.ReadFile(filepath.Join(p, "cgroup.procs"))
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return nil
			}
			return err
		}
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				pids = append(pids, pid)
			}
		}
		return nil
	})
	return pids, err
}

// childDirs lists the subdirectories of dir; a missing dir has none.
func childDirs(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

// removeTree removes a cgroup directory bottom-up. cgroup directories are
// removed with rmdir (their control files cannot be unlinked); EBUSY right
// after the last process exited is retried briefly.
func removeTree(dir string) error {
	children, err := childDirs(dir)
	if err != nil {
		return err
	}
	for _, c := range children {
		if err := removeTree(filepath.Join(dir, c)); err != nil {
			return err
		}
	}
	delay := 5 * time.Millisecond
	for attempt := 0; ; attempt++ {
		err := unix.Rmdir(dir)
		if err == nil || errors.Is(err, unix.ENOENT) {
			return nil
		}
		if !errors.Is(err, unix.EBUSY) || attempt == 5 {
			return fmt.Errorf("remove cgroup %s: %w", dir, err)
		}
		time.Sleep(delay)
		delay *= 2
	}
}

// Features are what a hierarchy's interface offers beyond the common
// files, so that callers ask for a feature rather than a cgroup version.
type Features struct {
	// MemoryThresholds: eventfd notifications at a usage line
	// (memory.usage_in_bytes through cgroup.event_control, v1 only).
	MemoryThresholds bool
	// MemoryHigh: memory.high, which throttles and notifies through
	// memory.events (v2): eviction's tripwires and memoryQoS.
	MemoryHigh bool
	// MemoryQoS: memory.min and memory.high, the kubelet's MemoryQoS.
	MemoryQoS bool
	// OOMGroup: memory.oom.group, the kernel kills a container whole (v2).
	OOMGroup bool
	// PressureFiles: per-cgroup PSI (memory.pressure) with triggers (v2).
	PressureFiles bool
}

// FeaturesOf tells what m's hierarchy offers.
func FeaturesOf(m Manager) Features {
	if m.Version() == 2 {
		return Features{MemoryHigh: true, MemoryQoS: true, OOMGroup: true, PressureFiles: true}
	}
	return Features{MemoryThresholds: true}
}
