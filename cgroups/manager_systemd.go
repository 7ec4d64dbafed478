package cgroups

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	systemd "github.com/coreos/go-systemd/v22/dbus"
	godbus "github.com/godbus/dbus/v5"
)

// Systemd manages cgroups through systemd (the systemd cgroup driver) on
// the unified hierarchy: every cgroup is a slice unit, named as the
// kubelet names them ({"kubepods","burstable","pod1"} is
// kubepods-burstable-pod1.slice, nested by systemd from its name), created
// and updated over D-Bus with its resource properties. Reads go to the
// cgroup filesystem.
type Systemd struct {
	mountpoint string
	mu         sync.Mutex
	conn       *systemd.Conn
}

var _ Manager = (*Systemd)(nil)

// NewSystemd connects to systemd on the system bus.
func NewSystemd(mountpoint string) (*Systemd, error) {
	if _, err := os.Stat("/run/systemd/system"); err != nil {
		return nil, errors.New("the systemd cgroup driver needs systemd as PID 1 (no /run/systemd/system): use cgroupDriver: cgroupfs")
	}
	conn, err := systemd.NewWithContext(context.Background())
	if err != nil {
		return nil, fmt.Errorf("connect to systemd over D-Bus: %w", err)
	}
	return &Systemd{mountpoint: mountpoint, conn: conn}, nil
}

// Version implements Manager.
func (m *Systemd) Version() int { return 2 }

// CgroupParent implements Manager: the slice unit, as runc's systemd
// driver expects it.
func (m *Systemd) CgroupParent(name Name) string { return Unit(name) }

// Unit is the slice unit of a cgroup name.
func Unit(name Name) string { return filepath.Base(name.Systemd()) }

// Path implements Manager.
func (m *Systemd) Path(name Name) string { return filepath.Join(m.mountpoint, name.Systemd()) }

// Set implements Manager: a missing slice is started as a transient unit,
// an existing one gets its properties updated.
func (m *Systemd) Set(name Name, rc *ResourceConfig) error {
	if err := name.Validate(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.Exists(name) {
		return m.updateLocked(name, rc)
	}
	unit := Unit(name)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	props := append([]systemd.Property{
		systemd.PropDescription("nodeagent " + name.Cgroupfs()),
		{Name: "DefaultDependencies", Value: godbus.MakeVariant(false)},
		{Name: "CPUAccounting", Value: godbus.MakeVariant(true)},
		{Name: "MemoryAccounting", Value: godbus.MakeVariant(true)},
		{Name: "TasksAccounting", Value: godbus.MakeVariant(true)},
	}, SystemdProperties(rc)...)
	done := make(chan string, 1)
	if _, err := m.conn.StartTransientUnitContext(ctx, unit, "replace", props, done); err != nil {
		return fmt.Errorf("start %s: %w", unit, err)
	}
	select {
	case result := <-done:
		if result != "done" {
			return fmt.Errorf("start %s: job %s", unit, result)
		}
	case <-ctx.Done():
		return fmt.Errorf("start %s: %w", unit, ctx.Err())
	}
	return nil
}

// Update implements Manager: properties are set on a live slice only;
// setting them never starts a unit.
func (m *Systemd) Update(name Name, rc *ResourceConfig) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.updateLocked(name, rc)
}

func (m *Systemd) updateLocked(name Name, rc *ResourceConfig) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return updateExisting(m, name, func() error {
		return m.conn.SetUnitPropertiesContext(ctx, Unit(name), true, SystemdProperties(rc)...)
	})
}

// SystemdProperties converts a ResourceConfig to slice properties:
// CPUWeight from shares (kubelet's linear mapping), CPUQuotaPerSecUSec
// rounded up to 10 ms as runc does (systemd stores a percentage), with its
// period, MemoryMax and TasksMax.
func SystemdProperties(rc *ResourceConfig) []systemd.Property {
	var props []systemd.Property
	add := func(name string, v any) {
		props = append(props, systemd.Property{Name: name, Value: godbus.MakeVariant(v)})
	}
	if rc == nil {
		return nil
	}
	if rc.CPUShares != nil {
		add("CPUWeight", SharesToWeight(*rc.CPUShares))
	}
	if rc.CPUQuota != nil || rc.CPUPeriod != nil {
		period := uint64(QuotaPeriod)
		if rc.CPUPeriod != nil {
			period = *rc.CPUPeriod
		}
		perSec := uint64(math.MaxUint64) // no limit
		if rc.CPUQuota != nil && *rc.CPUQuota > 0 {
			perSec = uint64(*rc.CPUQuota) * 1000000 / period
			if perSec%10000 != 0 {
				perSec = (perSec/10000 + 1) * 10000
			}
		}
		add("CPUQuotaPerSecUSec", perSec)
		add("CPUQuotaPeriodUSec", period)
	}
	if rc.Memory != nil && *rc.Memory > 0 {
		add("MemoryMax", uint64(*rc.Memory))
	}
	if rc.MemoryMin != nil && *rc.MemoryMin >= 0 {
		add("MemoryMin", uint64(*rc.MemoryMin))
	}
	if rc.MemoryLow != nil && *rc.MemoryLow >= 0 {
		add("MemoryLow", uint64(*rc.MemoryLow))
	}
	if rc.PidsLimit != nil && *rc.PidsLimit > 0 {
		add("TasksMax", uint64(*rc.PidsLimit))
	}
	return props
}

// setMemoryHigh sets the MemoryHigh property of the slice at dir (a path
// Path gave), -1 being infinity.
func (m *Systemd) setMemoryHigh(dir string, bytes int64) error {
	unit := filepath.Base(dir)
	if !strings.HasSuffix(unit, ".slice") || !strings.HasPrefix(dir, m.mountpoint+"/") {
		return fmt.Errorf("set MemoryHigh: %s is not a slice under %s", dir, m.mountpoint)
	}
	v := uint64(math.MaxUint64) // systemd's infinity
	if bytes >= 0 {
		v = uint64(bytes)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := m.conn.SetUnitPropertiesContext(ctx, unit, true, systemd.Property{Name: "MemoryHigh", Value: godbus.MakeVariant(v)}); err != nil {
		return fmt.Errorf("set MemoryHigh of %s: %w", unit, err)
	}
	return nil
}

// Exists implements Manager.
func (m *Systemd) Exists(name Name) bool {
	_, err := os.Stat(m.Path(name))
	return err == nil
}

// Pids implements Manager.
func (m *Systemd) Pids(name Name) ([]int, error) { return readProcs(m.Path(name)) }

// Children implements Manager, in cgroupfs form: a child slice
// "kubepods-burstable-pod1.slice" of kubepods-burstable.slice is "pod1".
func (m *Systemd) Children(name Name) ([]string, error) {
	dirs, err := childDirs(m.Path(name))
	if err != nil {
		return nil, err
	}
	prefix := strings.TrimSuffix(Unit(name), ".slice") + "-"
	if len(name) == 0 {
		prefix = ""
	}
	var out []string
	for _, d := range dirs {
		if c, ok := strings.CutSuffix(d, ".slice"); ok {
			if c, ok = strings.CutPrefix(c, prefix); ok && !strings.Contains(c, "-") {
				out = append(out, strings.ReplaceAll(c, "_", "-"))
			}
		}
	}
	return out, nil
}

// Remove implements Manager: the slice is stopped (with what is left in
// it) and its directory removed.
func (m *Systemd) Remove(name Name) error {
	unit := Unit(name)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m.mu.Lock()
	defer m.mu.Unlock()
	done := make(chan string, 1)
	if _, err := m.conn.StopUnitContext(ctx, unit, "replace", done); err == nil {
		select {
		case <-done:
		case <-ctx.Done():
			return fmt.Errorf("stop %s: %w", unit, ctx.Err())
		}
	}
	return removeTree(m.Path(name))
}
