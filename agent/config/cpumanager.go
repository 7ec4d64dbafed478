package config

import (
	"fmt"
	"maps"
	"math"
	"slices"

	"k8s.io/utils/cpuset"

	"nodeagent/internal/sat"
)

// CPU manager policy options nodeagent runs; the kubelet's others
// (full-pcpus-only, distribute-cpus-across-numa, align-by-socket,
// distribute-cpus-across-cores, prefer-align-cpus-by-uncorecache) are
// refused rather than silently dropped.
const StrictCPUReservation = "strict-cpu-reservation"

// CPUManagerStatic reports whether cpuManagerPolicy is static.
func (c *Config) CPUManagerStatic() bool { return c.CPUManagerPolicy == "static" }

// StrictCPUReservation reports the strict-cpu-reservation option.
func (c *Config) StrictCPUReservation() bool {
	return c.CPUManagerPolicyOptions[StrictCPUReservation] == "true"
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
		switch {
		case !c.CPUManagerStatic():
			bad("cpuManagerPolicyOptions", k, "options need cpuManagerPolicy: static")
		case k != StrictCPUReservation:
			bad("cpuManagerPolicyOptions", k, "nodeagent runs only "+StrictCPUReservation)
		case v != "true" && v != "false":
			bad("cpuManagerPolicyOptions."+k, v, "want true or false")
		}
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
