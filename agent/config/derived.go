package config

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"

	"nodeagent/agent/userns"
	"nodeagent/cgroups"
	"nodeagent/eviction"
	"nodeagent/internal/sat"
)

// Reserved returns systemReserved and kubeReserved as resource lists.
// reservedSystemCPUs, when set, is the reserved cpu instead, counted in
// systemReserved, as the kubelet overrides both.
func (c *Config) Reserved() []corev1.ResourceList {
	var out []corev1.ResourceList
	for _, m := range []map[string]string{c.SystemReserved, c.KubeReserved} {
		l := corev1.ResourceList{}
		for k, v := range m {
			if q, err := sat.ParseQuantity(v); err == nil {
				l[corev1.ResourceName(k)] = q
			}
		}
		out = append(out, l)
	}
	if cpus := c.ReservedCPUs(); cpus.Size() > 0 {
		delete(out[1], corev1.ResourceCPU)
		out[0][corev1.ResourceCPU] = *resource.NewQuantity(int64(cpus.Size()), resource.DecimalSI)
	}
	return out
}

// EvictionThresholds parses evictionHard, evictionSoft (with
// evictionSoftGracePeriod) and evictionMinimumReclaim with the kubelet's
// rules; errors name the field and the offending text.
func (c *Config) EvictionThresholds() ([]eviction.Threshold, error) {
	return eviction.ParseThresholds(eviction.Config{
		Hard: c.EvictionHard, Soft: c.EvictionSoft, SoftGracePeriod: c.EvictionSoftGracePeriod,
		MinimumReclaim: c.EvictionMinimumReclaim, EnforcePods: c.EnforcePods(),
	})
}

// EnforcePods reports whether kubepods gets the node allocatable limits.
func (c *Config) EnforcePods() bool {
	for _, k := range c.EnforceNodeAllocatable {
		if k == "pods" {
			return true
		}
	}
	return false
}

// PerQOS reports cgroupsPerQOS.
func (c *Config) PerQOS() bool { return c.CgroupsPerQOS == nil || *c.CgroupsPerQOS }

// Driver is the cgroup driver in effect: cgroupDriver, or cgroupfs.
func (c *Config) Driver() string {
	if c.CgroupDriver == "" {
		return "cgroupfs"
	}
	return c.CgroupDriver
}

// EnforceCPULimits reports cpuCFSQuota.
func (c *Config) EnforceCPULimits() bool { return c.CPUCFSQuota == nil || *c.CPUCFSQuota }

// CPUPeriodMicros is cpuCFSQuotaPeriod in µs.
func (c *Config) CPUPeriodMicros() uint64 {
	if c.CPUCFSQuotaPeriod == nil {
		return cgroups.QuotaPeriod
	}
	return uint64(c.CPUCFSQuotaPeriod.Duration / time.Microsecond)
}

// ImageGCThresholds are imageGCHighThresholdPercent and
// imageGCLowThresholdPercent.
func (c *Config) ImageGCThresholds() (high, low int) {
	high, low = 85, 80
	if c.ImageGCHighThresholdPercent != nil {
		high = int(*c.ImageGCHighThresholdPercent)
	}
	if c.ImageGCLowThresholdPercent != nil {
		low = int(*c.ImageGCLowThresholdPercent)
	}
	return high, low
}

// MaxRestartBackOff is crashLoopBackOff.maxContainerRestartPeriod (0: unset).
func (c *Config) MaxRestartBackOff() time.Duration {
	if p := c.CrashLoopBackOff.MaxContainerRestartPeriod; p != nil {
		return p.Duration
	}
	return 0
}

// LogMaxSize is containerLogMaxSize in bytes.
func (c *Config) LogMaxSize() int64 {
	q, _ := sat.ParseQuantity(c.ContainerLogMaxSize)
	return q.Value()
}

// LogMaxFiles is containerLogMaxFiles.
func (c *Config) LogMaxFiles() int {
	if c.ContainerLogMaxFiles == nil {
		return 5
	}
	return int(*c.ContainerLogMaxFiles)
}

// LogMonitorInterval is containerLogMonitorInterval.
func (c *Config) LogMonitorInterval() time.Duration {
	if c.ContainerLogMonitorInterval == nil {
		return 10 * time.Second
	}
	return c.ContainerLogMonitorInterval.Duration
}

// PodPids is podPidsLimit (-1: none).
func (c *Config) PodPids() int64 {
	if c.PodPidsLimit == nil {
		return -1
	}
	return *c.PodPidsLimit
}

// ResolvConf is the host resolv.conf pods inherit under dnsPolicy Default.
func (c *Config) ResolvConf() string {
	if c.ResolverConfig == nil {
		return ""
	}
	return *c.ResolverConfig
}

// MemoryQoS tells whether the MemoryQoS feature gate is on (beta and on
// by default since 1.37); it applies on cgroup v2 only, as in the kubelet.
func (c *Config) MemoryQoS() bool {
	on, set := c.FeatureGates["MemoryQoS"]
	return on || !set
}

// TieredMemory tells whether memoryReservationPolicy is
// TieredReservation: memory.min for Guaranteed pods, memory.low for
// Burstable ones (1.37's default None protects nothing).
func (c *Config) TieredMemory() bool {
	return c.MemoryReservationPolicy == kubeletv1beta1.TieredReservationMemoryReservationPolicy
}

// ThrottlingFactor is memoryThrottlingFactor; nil (1.37's default) sets
// no memory.high.
func (c *Config) ThrottlingFactor() *float64 { return c.MemoryThrottlingFactor }

// FailOnCgroupV1 is failCgroupV1 (default true since 1.35): refuse to
// start on a cgroup v1 host.
func (c *Config) FailOnCgroupV1() bool { return c.FailCgroupV1 == nil || *c.FailCgroupV1 }

// QOSReservedMemory is qosReserved's memory percentage, and whether it
// applies: as in the kubelet, only with the QOSReserved feature gate on.
func (c *Config) QOSReservedMemory() (percent int64, ok bool) {
	v, set := c.QOSReserved["memory"]
	if !set || !c.FeatureGates["QOSReserved"] {
		return 0, false
	}
	percent, err := parsePercent(v)
	return percent, err == nil
}

// IDsPerPod is each user-namespaced pod's range of host IDs
// (userNamespaces.idsPerPod; the kubelet's 65536 when unset or 0).
func (c *Config) IDsPerPod() uint32 {
	if u := c.UserNamespaces; u != nil && u.IDsPerPod != nil && *u.IDsPerPod != 0 {
		return uint32(*u.IDsPerPod)
	}
	return userns.UnitLength
}
