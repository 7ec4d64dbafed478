package config

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"k8s.io/utils/cpuset"

	"nodeagent/internal/sat"
)

// CPU manager policy options nodeagent runs. The NUMA ones
// (NUMAOptions) change nothing on a node of one NUMA node and one socket,
// the only nodes they are accepted on (checked at start). The kubelet's
// other option is taken only as "false" and refused when on, rather than
// silently dropped.
const (
	StrictCPUReservation     = "strict-cpu-reservation"
	FullPCPUsOnly            = "full-pcpus-only"
	PreferAlignByUncoreCache = "prefer-align-cpus-by-uncorecache"
	DistributeAcrossNUMA     = "distribute-cpus-across-numa"
	AlignBySocket            = "align-by-socket"
	distributeAcrossCores    = "distribute-cpus-across-cores"
)

var cpuOptionsRun = []string{StrictCPUReservation, FullPCPUsOnly, PreferAlignByUncoreCache, DistributeAcrossNUMA, AlignBySocket}

// NUMAOptions are the options set that align by NUMA node or socket.
func (c *Config) NUMAOptions() []string {
	var on []string
	for _, o := range []string{DistributeAcrossNUMA, AlignBySocket} {
		if c.cpuOption(o) {
			on = append(on, o)
		}
	}
	return on
}

// CPUManagerStatic reports whether cpuManagerPolicy is static.
func (c *Config) CPUManagerStatic() bool { return c.CPUManagerPolicy == "static" }

// StrictCPUReservation reports the strict-cpu-reservation option.
func (c *Config) StrictCPUReservation() bool { return c.cpuOption(StrictCPUReservation) }

// PreferAlignByUncoreCache reports the prefer-align-cpus-by-uncorecache
// option.
func (c *Config) PreferAlignByUncoreCache() bool { return c.cpuOption(PreferAlignByUncoreCache) }

// FullPCPUsOnly reports the full-pcpus-only option.
func (c *Config) FullPCPUsOnly() bool { return c.cpuOption(FullPCPUsOnly) }

// cpuOption is a policy option's value, read as the kubelet does
// (strconv.ParseBool; validated at load).
func (c *Config) cpuOption(name string) bool {
	on, _ := strconv.ParseBool(c.CPUManagerPolicyOptions[name])
	return on
}

// ReservedCPUs is reservedSystemCPUs; the empty set when unset.
func (c *Config) ReservedCPUs() cpuset.CPUSet {
	set, _ := cpuset.Parse(c.ReservedSystemCPUs) // validated at load
	return set
}

// ReservedCPUCount is how many CPUs the static policy reserves when
// reservedSystemCPUs is unset: systemReserved plus kubeReserved cpu,
// rounded up to whole CPUs, as the kubelet does.
func (c *Config) ReservedCPUCount() int {
	var milli int64
	for _, r := range c.Reserved() {
		if q, ok := r["cpu"]; ok {
			milli = sat.Add(milli, sat.MilliValue(q))
		}
	}
	return int(math.Ceil(float64(milli) / 1000))
}

// validateCPUManager checks the CPU, memory and topology manager fields:
// nodeagent runs the CPU manager's none and static policies and no memory
// or topology manager, so it refuses what it would not do.
func (c *Config) validateCPUManager() []error {
	var errs []error
	bad := func(field string, value any, why string) {
		errs = append(errs, fmt.Errorf("%s: invalid value %q: %s", field, fmt.Sprint(value), why))
	}
	switch c.CPUManagerPolicy {
	case "", "none", "static":
	default:
		bad("cpuManagerPolicy", c.CPUManagerPolicy, "want none or static")
	}
	for _, k := range slices.Sorted(maps.Keys(c.CPUManagerPolicyOptions)) {
		v := c.CPUManagerPolicyOptions[k]
		on, err := strconv.ParseBool(v)
		switch {
		case !c.CPUManagerStatic():
			bad("cpuManagerPolicyOptions", k, "options need cpuManagerPolicy: static")
		case !slices.Contains(cpuOptionsRun, k) && k != distributeAcrossCores:
			bad("cpuManagerPolicyOptions", k, "unknown option: nodeagent runs "+strings.Join(cpuOptionsRun, ", "))
		case err != nil:
			bad("cpuManagerPolicyOptions."+k, v, "want true or false")
		case on && k == distributeAcrossCores:
			bad("cpuManagerPolicyOptions."+k, v, "nodeagent does not run this option, only "+strings.Join(cpuOptionsRun, ", "))
		}
	}
	// The kubelet's exclusions (policy_options.go ValidateStaticPolicyOptions).
	if c.PreferAlignByUncoreCache() && c.cpuOption(DistributeAcrossNUMA) {
		bad("cpuManagerPolicyOptions", PreferAlignByUncoreCache, "can not be used with "+DistributeAcrossNUMA)
	}
	if c.ReservedSystemCPUs != "" {
		if set, err := cpuset.Parse(c.ReservedSystemCPUs); err != nil {
			bad("reservedSystemCPUs", c.ReservedSystemCPUs, "want a CPU list such as 0-1,4: "+err.Error())
		} else if set.IsEmpty() {
			bad("reservedSystemCPUs", c.ReservedSystemCPUs, "names no CPU")
		}
	}
	if c.CPUManagerStatic() && c.ReservedSystemCPUs == "" && c.ReservedCPUCount() == 0 {
		bad("cpuManagerPolicy", c.CPUManagerPolicy, "the static policy needs reserved CPUs: set reservedSystemCPUs, or a cpu in kubeReserved or systemReserved")
	}
	if c.CPUManagerReconcilePeriod.Duration < 0 {
		bad("cpuManagerReconcilePeriod", c.CPUManagerReconcilePeriod.Duration, "must be >= 0")
	}
	switch c.MemoryManagerPolicy {
	case "", "None":
	default:
		bad("memoryManagerPolicy", c.MemoryManagerPolicy, "nodeagent has no memory manager: want None")
	}
	switch c.TopologyManagerPolicy {
	case "", "none":
	default:
		bad("topologyManagerPolicy", c.TopologyManagerPolicy, "nodeagent has no topology manager: want none")
	}
	for _, k := range slices.Sorted(maps.Keys(c.TopologyManagerPolicyOptions)) {
		bad("topologyManagerPolicyOptions", k, "nodeagent has no topology manager")
	}
	if len(c.ReservedMemory) > 0 {
		bad("reservedMemory", len(c.ReservedMemory), "is the memory manager's, which nodeagent does not have")
	}
	return errs
}
