package agent

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"k8s.io/component-helpers/node/util/sysctl"

	"nodeagent/cgroups"
)

// cgroupV1Deprecated is the kubelet's CgroupV1DeprecatedWarning.
const cgroupV1Deprecated = "cgroup v1 detected. cgroup v1 support is deprecated and will be removed in a future release. Please migrate to cgroup v2. More information at https://git.k8s.io/enhancements/keps/sig-node/5573-remove-cgroup-v1"

// buildCgroups makes the QoS cgroup tree, with the runtime's driver.
func (a *Agent) buildCgroups(ctx context.Context, p *parts) error {
	cfg := a.cfg
	driver, err := a.cgroupDriver(ctx, p)
	if err != nil {
		return err
	}
	p.cgroupDriver = driver
	mgr := a.opts.Cgroups
	if mgr == nil {
		var err error
		if mgr, err = cgroups.NewManager(driver); err != nil {
			return err
		}
	}
	p.mgr = mgr
	if mgr.Version() == 1 && cfg.FailOnCgroupV1() {
		return errors.New("nodeagent is configured not to run on a host using cgroup v1 (failCgroupV1 is true, the kubelet's default since 1.35): " +
			"set failCgroupV1: false in the config to run on this host")
	}
	kernel := a.opts.Sysctl
	if kernel == nil {
		kernel = sysctl.New()
	}
	if err := setupKernelTunables(kernel, cfg.ProtectKernelDefaults, a.log.With("component", "node")); err != nil {
		return err
	}
	treeCfg := cgroups.TreeConfig{
		Root:        cgroups.ParseCgroupfs(cfg.CgroupRoot),
		PerQOS:      cfg.PerQOS(),
		Pod:         cgroups.PodOptions{EnforceCPULimits: cfg.EnforceCPULimits(), CPUPeriod: cfg.CPUPeriodMicros(), PidsLimit: cfg.PodPids()},
		Allocatable: cgroups.NodeAllocatableConfig(p.capacity, cfg.Reserved(), cfg.EnforcePods()),
	}
	if p.cpus != nil {
		treeCfg.Pod.ExclusiveCPUs = p.cpus.HasExclusive
	}
	if pct, ok := cfg.QOSReservedMemory(); ok {
		treeCfg.MemoryReserve = &pct
	}
	switch {
	case !cgroups.FeaturesOf(mgr).MemoryQoS:
		if cfg.TieredMemory() || cfg.ThrottlingFactor() != nil {
			a.log.Warn("memory QoS (memoryReservationPolicy, memoryThrottlingFactor) is not applied: as in the kubelet, it needs cgroup v2 (memory.min, memory.low, memory.high); this host has v1")
		}
	case cfg.MemoryQoS() && cfg.TieredMemory():
		treeCfg.MemoryProtection, treeCfg.Pod.TieredMemory = cgroups.TieredMemoryProtection, true
	default:
		// As the kubelet at start: no protection left from before.
		treeCfg.MemoryProtection = cgroups.ResetMemoryProtection
	}
	p.tree = cgroups.NewTree(mgr, treeCfg)
	if err := p.tree.SyncQoS(nil); err != nil {
		// One line: the first failure says it (the others repeat it for the
		// QoS cgroups below).
		if joined, ok := err.(interface{ Unwrap() []error }); ok && len(joined.Unwrap()) > 0 {
			err = joined.Unwrap()[0]
		}
		return fmt.Errorf("cannot write the QoS cgroups under cgroupRoot %q (%s): %w; run nodeagent as root with %s writable, or set cgroupRoot to a cgroup it may create",
			cfg.CgroupRoot, mgr.Path(p.tree.Kubepods()), err, cgroups.DefaultMountpoint)
	}
	a.log.Info("QoS cgroup tree ready", "cgroups", "v"+strconv.Itoa(mgr.Version()), "kubepods", mgr.Path(p.tree.Kubepods()))
	return nil
}
