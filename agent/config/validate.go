package config

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/distribution/reference"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"

	"nodeagent/agent/userns"
	"nodeagent/cgroups"
	"nodeagent/internal/sat"
	"nodeagent/internal/sysctl"
)

// Validate checks every honoured field and returns one error per bad field.
func (c *Config) Validate() error {
	var errs []error
	bad := func(field string, value any, why string) {
		errs = append(errs, fmt.Errorf("%s: invalid value %q: %s", field, fmt.Sprint(value), why))
	}
	if !filepath.IsAbs(c.StaticPodPath) {
		bad("staticPodPath", c.StaticPodPath, "must be an absolute path")
	}
	if !strings.HasPrefix(c.ContainerRuntimeEndpoint, "unix://") || len(c.ContainerRuntimeEndpoint) <= len("unix://") {
		bad("containerRuntimeEndpoint", c.ContainerRuntimeEndpoint, "want unix:///path/to/socket")
	}
	if !strings.HasPrefix(c.CgroupRoot, "/") {
		bad("cgroupRoot", c.CgroupRoot, "must be an absolute cgroup path")
	} else if err := cgroups.ParseCgroupfs(c.CgroupRoot).Validate(); err != nil {
		bad("cgroupRoot", c.CgroupRoot, err.Error())
	}
	switch c.CgroupDriver {
	case "cgroupfs", "systemd":
	default:
		bad("cgroupDriver", c.CgroupDriver, "want cgroupfs or systemd")
	}
	if c.MaxPods <= 0 {
		bad("maxPods", c.MaxPods, "must be > 0")
	}
	if c.PodPidsLimit != nil && *c.PodPidsLimit != -1 && *c.PodPidsLimit <= 0 {
		bad("podPidsLimit", *c.PodPidsLimit, "must be -1 (no pod limit) or > 0")
	}
	for i, p := range c.AllowedUnsafeSysctls {
		// Only sysctls of a pod's own namespaces may be allowed: a node-wide
		// one would let a pod change the host.
		if sysctl.Namespace(strings.TrimSuffix(p, "*")) == "" {
			bad(fmt.Sprintf("allowedUnsafeSysctls[%d]", i), p, "is not known to be namespaced (kernel.shm*, kernel.msg*, kernel.sem, fs.mqueue.*, net.*)")
		}
	}
	if c.EventRecordQPS != nil && *c.EventRecordQPS < 0 {
		bad("eventRecordQPS", *c.EventRecordQPS, "must be >= 0 (0: no limit)")
	}
	if c.EventBurst < 0 {
		bad("eventBurst", c.EventBurst, "must be >= 0")
	}
	if f := c.MemoryThrottlingFactor; f != nil && (*f <= 0 || *f > 1 || math.IsNaN(*f)) {
		bad("memoryThrottlingFactor", *f, "must be greater than 0 and at most 1.0")
	}
	// The kubelet still accepts 0.9, 1.34's default, without the gate.
	if f := c.MemoryThrottlingFactor; f != nil && *f != 0.9 && !c.MemoryQoS() {
		bad("memoryThrottlingFactor", *f, "must not be set when the MemoryQoS feature gate is off")
	}
	switch c.MemoryReservationPolicy {
	case kubeletv1beta1.NoneMemoryReservationPolicy:
	case kubeletv1beta1.TieredReservationMemoryReservationPolicy:
		if !c.MemoryQoS() {
			bad("memoryReservationPolicy", c.MemoryReservationPolicy, "needs the MemoryQoS feature gate on")
		}
	default:
		bad("memoryReservationPolicy", c.MemoryReservationPolicy, "want None or TieredReservation")
	}
	for res, v := range c.QOSReserved {
		if res != "memory" {
			bad("qosReserved", res, "only memory can be reserved")
		} else if _, err := parsePercent(v); err != nil {
			bad("qosReserved.memory", v, err.Error())
		}
	}
	if c.HealthzPort != nil && (*c.HealthzPort < 0 || *c.HealthzPort > 65535) {
		bad("healthzPort", *c.HealthzPort, "must be 0 (disabled) to 65535")
	}
	if net.ParseIP(c.HealthzBindAddress) == nil {
		bad("healthzBindAddress", c.HealthzBindAddress, "must be an IP address")
	}
	if c.ReadOnlyPort < 0 || c.ReadOnlyPort > 65535 {
		bad("readOnlyPort", c.ReadOnlyPort, "must be 0 (disabled) to 65535")
	}
	if net.ParseIP(c.Address) == nil {
		bad("address", c.Address, "must be an IP address")
	}
	if _, _, err := net.ParseCIDR(c.PodCIDR); err != nil {
		bad("podCIDR", c.PodCIDR, "must be a CIDR such as 10.88.0.0/16")
	}
	for _, ip := range c.ClusterDNS {
		if net.ParseIP(ip) == nil {
			bad("clusterDNS", ip, "must be an IP address")
		}
	}
	if c.CPUCFSQuotaPeriod != nil {
		if p := c.CPUCFSQuotaPeriod.Duration; p < time.Millisecond || p > time.Second {
			bad("cpuCFSQuotaPeriod", p, "must be between 1ms and 1s")
		}
	}
	if q, err := sat.ParseQuantity(c.ContainerLogMaxSize); err != nil || q.Value() < 1024 || !sat.FitsValue(q) {
		bad("containerLogMaxSize", c.ContainerLogMaxSize, "must be a quantity of at least 1Ki and at most 8Ei, such as 10Mi")
	}
	high, low := c.ImageGCThresholds()
	if high < 0 || high > 100 {
		bad("imageGCHighThresholdPercent", high, "must be between 0 and 100")
	}
	if low < 0 || low > 100 || low >= high && high < 100 {
		bad("imageGCLowThresholdPercent", low, fmt.Sprintf("must be between 0 and 100 and below imageGCHighThresholdPercent (%d)", high))
	}
	switch p := c.ImagePullCredentialsVerificationPolicy; p {
	case kubeletv1beta1.NeverVerify, kubeletv1beta1.NeverVerifyPreloadedImages, kubeletv1beta1.NeverVerifyAllowlistedImages, kubeletv1beta1.AlwaysVerify:
	default:
		bad("imagePullCredentialsVerificationPolicy", p, `valid options are "NeverVerify", "NeverVerifyPreloadedImages", "NeverVerifyAllowlistedImages" or "AlwaysVerify"`)
	}
	if len(c.PreloadedImagesVerificationAllowlist) > 0 && c.ImagePullCredentialsVerificationPolicy != kubeletv1beta1.NeverVerifyAllowlistedImages {
		bad("preloadedImagesVerificationAllowlist", c.PreloadedImagesVerificationAllowlist, `can't be set if imagePullCredentialsVerificationPolicy is not "NeverVerifyAllowlistedImages"`)
	}
	for i, p := range c.PreloadedImagesVerificationAllowlist {
		if err := checkImagePattern(p); err != nil {
			bad(fmt.Sprintf("preloadedImagesVerificationAllowlist[%d]", i), p, err.Error())
		}
	}
	if u := c.UserNamespaces; u != nil && u.IDsPerPod != nil {
		if n := *u.IDsPerPod; n < userns.UnitLength || n%userns.UnitLength != 0 || n > math.MaxUint32 {
			bad("userNamespaces.idsPerPod", n, fmt.Sprintf("must be a multiple of %d, at least %d and at most %d", userns.UnitLength, userns.UnitLength, int64(math.MaxUint32)))
		}
	}
	if p := c.CrashLoopBackOff.MaxContainerRestartPeriod; p != nil && (p.Duration < time.Second || p.Duration > 300*time.Second) {
		bad("crashLoopBackOff.maxContainerRestartPeriod", p.Duration, "must be between 1s and 300s")
	}
	if c.ImageMinimumGCAge.Duration < 0 {
		bad("imageMinimumGCAge", c.ImageMinimumGCAge.Duration, "must be >= 0")
	}
	grace, critical := c.ShutdownGracePeriod.Duration, c.ShutdownGracePeriodCriticalPods.Duration
	for _, f := range []struct {
		name string
		d    time.Duration
	}{{"shutdownGracePeriod", grace}, {"shutdownGracePeriodCriticalPods", critical}} {
		if f.d < 0 || (f.d > 0 && f.d < time.Second) {
			bad(f.name, f.d, "must be either zero or otherwise >= 1 sec")
		}
	}
	if critical > grace {
		bad("shutdownGracePeriodCriticalPods", critical, fmt.Sprintf("must be <= shutdownGracePeriod (%v)", grace))
	}
	if len(c.ShutdownGracePeriodByPodPriority) > 0 && (grace > 0 || critical > 0) {
		bad("shutdownGracePeriodByPodPriority", len(c.ShutdownGracePeriodByPodPriority), "cannot be given with shutdownGracePeriod or shutdownGracePeriodCriticalPods")
	}
	if maxAge := c.ImageMaximumGCAge.Duration; maxAge < 0 {
		bad("imageMaximumGCAge", maxAge, "must be >= 0")
	} else if maxAge > 0 && maxAge <= c.ImageMinimumGCAge.Duration {
		bad("imageMaximumGCAge", maxAge, fmt.Sprintf("must be greater than imageMinimumGCAge (%v)", c.ImageMinimumGCAge.Duration))
	}
	if c.ContainerLogMaxFiles != nil && *c.ContainerLogMaxFiles < 2 {
		bad("containerLogMaxFiles", *c.ContainerLogMaxFiles, "must be >= 2")
	}
	logInterval := time.Duration(0)
	if c.ContainerLogMonitorInterval != nil {
		logInterval = c.ContainerLogMonitorInterval.Duration
	}
	for field, d := range map[string]time.Duration{
		"containerLogMonitorInterval": logInterval,
		"runtimeRequestTimeout":       c.RuntimeRequestTimeout.Duration,
		"fileCheckFrequency":          c.FileCheckFrequency.Duration,
		"syncFrequency":               c.SyncFrequency.Duration,
	} {
		if d <= 0 {
			bad(field, d, "must be > 0")
		}
	}
	for field, m := range map[string]map[string]string{"systemReserved": c.SystemReserved, "kubeReserved": c.KubeReserved} {
		for _, k := range slices.Sorted(maps.Keys(m)) {
			if !reservableResources[k] {
				bad(field+"."+k, m[k], "unknown resource; want cpu, memory, pid or ephemeral-storage")
				continue
			}
			q, err := sat.ParseQuantity(m[k])
			switch {
			case err != nil || q.Sign() < 0:
				bad(field+"."+k, m[k], "must be a non-negative quantity such as 500m or 1Gi")
			case !sat.FitsMilli(q):
				bad(field+"."+k, m[k], fmt.Sprintf("must be at most %dm", int64(math.MaxInt64)))
			}
		}
	}
	for _, k := range c.EnforceNodeAllocatable {
		if !enforceKeys[k] {
			bad("enforceNodeAllocatable", k, "want pods, system-reserved, kube-reserved, their -compressible forms, or none")
		}
		if k == "none" && len(c.EnforceNodeAllocatable) > 1 {
			bad("enforceNodeAllocatable", k, "none cannot be combined with other values")
		}
	}
	if _, err := c.EvictionThresholds(); err != nil {
		errs = append(errs, err)
	}
	if c.EvictionMaxPodGracePeriod < 0 {
		bad("evictionMaxPodGracePeriod", c.EvictionMaxPodGracePeriod, "must be >= 0")
	}
	if c.EvictionPressureTransitionPeriod.Duration < 0 {
		bad("evictionPressureTransitionPeriod", c.EvictionPressureTransitionPeriod.Duration, "must be >= 0")
	}
	errs = append(errs, c.validateCluster()...)
	errs = append(errs, c.validateServer()...)
	errs = append(errs, c.validateCPUManager()...)
	errs = append(errs, c.validateSwap()...)
	return errors.Join(errs...)
}

// validateCluster checks the fields API-server mode uses.
func (c *Config) validateCluster() []error {
	var errs []error
	bad := func(field string, value any, why string) {
		errs = append(errs, fmt.Errorf("%s: invalid value %q: %s", field, fmt.Sprint(value), why))
	}
	if d := c.NodeStatusUpdateFrequency.Duration; d <= 0 {
		bad("nodeStatusUpdateFrequency", d, "must be > 0")
	}
	if d := c.NodeStatusReportFrequency.Duration; d < c.NodeStatusUpdateFrequency.Duration {
		bad("nodeStatusReportFrequency", d, "must be >= nodeStatusUpdateFrequency")
	}
	if c.NodeLeaseDurationSeconds <= 0 {
		bad("nodeLeaseDurationSeconds", c.NodeLeaseDurationSeconds, "must be > 0")
	}
	if c.NodeStatusMaxImages != nil && *c.NodeStatusMaxImages < -1 {
		bad("nodeStatusMaxImages", *c.NodeStatusMaxImages, "must be >= -1 (-1: no cap)")
	}
	if c.KubeAPIQPS != nil && *c.KubeAPIQPS < 0 {
		bad("kubeAPIQPS", *c.KubeAPIQPS, "must be >= 0")
	}
	if c.KubeAPIBurst < 0 {
		bad("kubeAPIBurst", c.KubeAPIBurst, "must be >= 0")
	}
	for i, t := range c.RegisterWithTaints {
		if err := validateTaint(t); err != nil {
			errs = append(errs, fmt.Errorf("registerWithTaints[%d]: %w", i, err))
		}
	}
	return errs
}

// Reloadable are the honoured fields a running agent takes on SIGHUP; the
// others need a restart.
var Reloadable = []string{
	"imageGCHighThresholdPercent", "imageGCLowThresholdPercent", "imageMinimumGCAge", "imageMaximumGCAge",
	"containerLogMaxSize", "containerLogMaxFiles",
}

// checkImagePattern is the kubelet's check of an allowlist entry: a
// repository without tag or digest, or a prefix ending in "/*".
func checkImagePattern(p string) error {
	switch {
	case strings.TrimSpace(p) != p:
		return errors.New("leading/trailing spaces are not allowed")
	case p == "":
		return errors.New("the supplied pattern is too short")
	case strings.Contains(p, "*"):
		prefix, ok := strings.CutSuffix(p, "/*")
		if !ok || strings.Contains(prefix, "*") {
			return errors.New("not a valid wildcard pattern, only patterns ending with '/*' are allowed")
		}
		if prefix == "" {
			return errors.New("at least registry hostname is required")
		}
		return nil
	}
	ref, err := reference.Parse(p)
	if err != nil {
		return fmt.Errorf("failed to parse as an image name: %w", err)
	}
	if _, tagged := ref.(reference.Tagged); tagged {
		return errors.New("neither tag nor digest is accepted in an image reference")
	}
	if _, digested := ref.(reference.Digested); digested {
		return errors.New("neither tag nor digest is accepted in an image reference")
	}
	return nil
}
