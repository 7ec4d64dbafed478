package criconfig

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"nodeagent/agent/source"
	"nodeagent/cgroups"
	"nodeagent/cri"
	"nodeagent/internal/expand"
	"nodeagent/internal/qos"
	"nodeagent/internal/sat"
)

// containerConfig builds the ContainerConfig as the kubelet does: $(VAR)
// expansion of command and args, env with the downward API, mounts, the log
// path <name>/<restartCount>.log, CRI resources and the oom_score_adj of
// the pod's QoS class, and labels and annotations that let a restarted agent
// stop the container without its spec.
func (b *Builder) Container(ctx context.Context, plan *Plan, c *corev1.Container, imageRef string, restartCount int32, podIP string) (*runtimeapi.ContainerConfig, error) {
	pod := plan.Pod
	env, err := b.containerEnv(ctx, pod, c, podIP)
	if err != nil {
		return nil, err
	}
	mapping := expand.Mapping(env)
	expandAll := func(in []string) []string {
		out := make([]string, len(in))
		for i, s := range in {
			out[i] = expand.Vars(s, mapping)
		}
		return out
	}
	mounts, err := b.mounts(plan, c, mapping)
	if err != nil {
		return nil, err
	}
	if mountsEtcHosts(c) {
		hosts, err := b.hostsFile(pod, podIP)
		if err != nil {
			return nil, fmt.Errorf("hosts file: %w", err)
		}
		mounts = append(mounts, &runtimeapi.Mount{ContainerPath: "/etc/hosts", HostPath: hosts})
	}
	var messageFile string
	if c.TerminationMessagePath != "" {
		if messageFile, err = b.host.TerminationMessageFile(pod, c.Name); err != nil {
			return nil, fmt.Errorf("termination message file: %w", err)
		}
		mounts = append(mounts, &runtimeapi.Mount{ContainerPath: c.TerminationMessagePath, HostPath: messageFile})
	}
	var envs []*runtimeapi.KeyValue
	for _, e := range env {
		envs = append(envs, &runtimeapi.KeyValue{Key: e.Name, Value: []byte(e.Value)})
	}
	grace := int64(corev1.DefaultTerminationGracePeriodSeconds)
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		grace = *pod.Spec.TerminationGracePeriodSeconds
	}
	oomScoreAdj := b.opts.OOMRange.Map(qos.ContainerOOMScoreAdj(pod, c, b.opts.MemoryCapacity, isCritical(pod)))

	cfg := &runtimeapi.ContainerConfig{
		Metadata:   &runtimeapi.ContainerMetadata{Name: c.Name, Attempt: uint32(restartCount)},
		Image:      &runtimeapi.ImageSpec{Image: imageRef, UserSpecifiedImage: c.Image},
		Command:    expandAll(c.Command),
		Args:       expandAll(c.Args),
		WorkingDir: c.WorkingDir,
		Envs:       envs,
		Mounts:     mounts,
		Labels: map[string]string{
			cri.LabelPodName:       pod.Name,
			cri.LabelPodNamespace:  pod.Namespace,
			cri.LabelPodUID:        string(pod.UID),
			cri.LabelContainerName: c.Name,
			cri.LabelManagedBy:     b.opts.NodeName,
		},
		Annotations: map[string]string{
			cri.AnnotationContainerHash:            strconv.FormatUint(uint64(containerHash(c)), 16),
			cri.AnnotationRestartCount:             strconv.Itoa(int(restartCount)),
			cri.AnnotationTerminationGrace:         strconv.FormatInt(grace, 10),
			cri.AnnotationTerminationMessage:       c.TerminationMessagePath,
			cri.AnnotationTerminationMessagePolicy: string(c.TerminationMessagePolicy),
			cri.AnnotationTerminationMessageFile:   messageFile,
			cri.AnnotationContainerOOMScoreAdj:     strconv.Itoa(oomScoreAdj),
			cri.AnnotationContainerImageRequest:    c.Image,
			cri.AnnotationContainerResources:       EffectiveResources(pod, c).String(),
		},
		LogPath:   filepath.Join(c.Name, fmt.Sprintf("%d.log", restartCount)),
		Stdin:     c.Stdin,
		StdinOnce: c.StdinOnce,
		Tty:       c.TTY,
		Linux: &runtimeapi.LinuxContainerConfig{
			Resources:       b.containerResources(pod, c, oomScoreAdj),
			SecurityContext: containerSecurityContext(pod, c, b.opts.SeccompRoot),
		},
	}
	var images []string
	for _, m := range cfg.Mounts {
		if m.Image != nil {
			images = append(images, m.Image.Image)
		}
	}
	if len(images) > 0 {
		cfg.Annotations[cri.AnnotationImageVolumes] = strings.Join(images, ",")
	}
	// In a user namespace every mount is idmapped to the pod's range, as
	// the kubelet asks: the container's root owns what host root owns.
	if ns := plan.UserNamespace; ns != nil {
		cfg.Linux.SecurityContext.NamespaceOptions.UsernsOptions = ns
		for _, m := range cfg.Mounts {
			m.UidMappings, m.GidMappings = ns.Uids, ns.Gids
		}
	}
	// What stopping the container needs if the pod's spec is gone by then
	// (deleted while the agent was down), as the kubelet keeps it.
	if c.Lifecycle != nil && c.Lifecycle.PreStop != nil {
		b, _ := json.Marshal(c.Lifecycle.PreStop)
		cfg.Annotations[cri.AnnotationPreStopHandler] = string(b)
		if len(c.Ports) > 0 {
			b, _ := json.Marshal(c.Ports)
			cfg.Annotations[cri.AnnotationContainerPorts] = string(b)
		}
	}
	return cfg, nil
}

// SpecFromAnnotations rebuilds what stopping an orphaned container needs:
// its preStop handler and the ports it may name.
func SpecFromAnnotations(name string, annotations map[string]string) *corev1.Container {
	raw, ok := annotations[cri.AnnotationPreStopHandler]
	if !ok {
		return nil
	}
	var preStop corev1.LifecycleHandler
	if err := json.Unmarshal([]byte(raw), &preStop); err != nil {
		return nil
	}
	c := &corev1.Container{Name: name, Lifecycle: &corev1.Lifecycle{PreStop: &preStop}}
	if ports, ok := annotations[cri.AnnotationContainerPorts]; ok {
		json.Unmarshal([]byte(ports), &c.Ports)
	}
	return c
}

// Effective are a container's cpu (milli) and memory (bytes) requests and
// limits, a limit it does not set being the pod's: what an in-place
// resize compares (the kubelet's containerResourcesFromRequirements).
type Effective struct{ CPURequest, CPULimit, MemoryRequest, MemoryLimit int64 }

// EffectiveResources are c's Effective values in pod.
func EffectiveResources(pod *corev1.Pod, c *corev1.Container) Effective {
	cpuLimit, memLimit := *c.Resources.Limits.Cpu(), *c.Resources.Limits.Memory()
	if cpuLimit.IsZero() {
		cpuLimit = qos.PodLimit(pod, corev1.ResourceCPU)
	}
	if memLimit.IsZero() {
		memLimit = qos.PodLimit(pod, corev1.ResourceMemory)
	}
	return Effective{CPURequest: sat.MilliValue(*c.Resources.Requests.Cpu()), CPULimit: sat.MilliValue(cpuLimit),
		MemoryRequest: sat.Value(*c.Resources.Requests.Memory()), MemoryLimit: sat.Value(memLimit)}
}

// String is the annotation's form: "cpu=REQ/LIM memory=REQ/LIM".
func (e Effective) String() string {
	return fmt.Sprintf("cpu=%d/%d memory=%d/%d", e.CPURequest, e.CPULimit, e.MemoryRequest, e.MemoryLimit)
}

// ParseEffective reads the annotation back; ok is false for a container
// made without it.
func ParseEffective(s string) (e Effective, ok bool) {
	n, err := fmt.Sscanf(s, "cpu=%d/%d memory=%d/%d", &e.CPURequest, &e.CPULimit, &e.MemoryRequest, &e.MemoryLimit)
	return e, err == nil && n == 4
}

// Resources are the container's CRI resources as it is created with them,
// and as an in-place resize updates them.
func (b *Builder) Resources(pod *corev1.Pod, c *corev1.Container) *runtimeapi.LinuxContainerResources {
	return b.containerResources(pod, c, b.opts.OOMRange.Map(qos.ContainerOOMScoreAdj(pod, c, b.opts.MemoryCapacity, isCritical(pod))))
}

// containerResources are the kubelet's CRI resources: shares from the cpu
// request (or limit), CFS quota from the cpu limit, memory limit.
func (b *Builder) containerResources(pod *corev1.Pod, c *corev1.Container, oomScoreAdj int) *runtimeapi.LinuxContainerResources {
	// A container without a limit of its own has the pod-level one.
	cpuLimit, memLimit := *c.Resources.Limits.Cpu(), *c.Resources.Limits.Memory()
	if cpuLimit.IsZero() {
		cpuLimit = qos.PodLimit(pod, corev1.ResourceCPU)
	}
	if memLimit.IsZero() {
		memLimit = qos.PodLimit(pod, corev1.ResourceMemory)
	}
	cpuReq, cpuLim := sat.MilliValue(*c.Resources.Requests.Cpu()), sat.MilliValue(cpuLimit)
	if cpuReq == 0 && cpuLim > 0 {
		cpuReq = cpuLim
	}
	r := &runtimeapi.LinuxContainerResources{
		CpuShares:          int64(cgroups.MilliCPUToShares(cpuReq)),
		MemoryLimitInBytes: sat.Value(memLimit),
		OomScoreAdj:        int64(oomScoreAdj),
	}
	if b.opts.OOMGroupKill {
		r.Unified = map[string]string{"memory.oom.group": "1"}
	}
	b.setSwap(r, pod, c)
	if b.opts.MemoryQoS {
		request, limit := sat.Value(*c.Resources.Requests.Memory()), sat.Value(*c.Resources.Limits.Memory())
		set := func(file string, v int64) {
			if r.Unified == nil {
				r.Unified = map[string]string{}
			}
			r.Unified[file] = strconv.FormatInt(v, 10)
		}
		// 1.37: protection only under TieredReservation (memory.min for
		// Guaranteed, memory.low otherwise); else both are cleared.
		switch {
		case request > 0 && b.opts.TieredMemory && qos.Class(pod) == corev1.PodQOSGuaranteed:
			set("memory.min", request)
		case request > 0 && b.opts.TieredMemory:
			set("memory.low", request)
		default:
			set("memory.min", 0)
			set("memory.low", 0)
		}
		// Throttling only with a memoryThrottlingFactor (no default since 1.37).
		// Not under a pod-level memory limit alone: the pod cgroup throttles.
		if f := b.opts.MemoryThrottlingFactor; f != nil && (limit > 0 || memLimit.IsZero()) {
			if high := cgroups.MemoryQoSHigh(request, limit, b.opts.AllocatableMemory, *f, int64(os.Getpagesize())); high > 0 {
				set("memory.high", high)
			}
		}
	}
	if b.opts.EnforceCPULimits {
		period := int64(b.opts.CPUPeriod)
		if period == 0 {
			period = cgroups.QuotaPeriod
		}
		r.CpuPeriod = period
		r.CpuQuota = cgroups.MilliCPUToQuota(cpuLim, period)
	}
	if b.opts.CPUs != nil {
		set, exclusive := b.opts.CPUs.CPUs(pod.UID, c.Name)
		if !set.IsEmpty() {
			r.CpusetCpus = set.String()
		}
		// No CFS quota on CPUs of its own (DisableCPUQuotaWithExclusiveCPUs,
		// locked on in 1.37): a quota would only throttle it there.
		if exclusive && b.opts.EnforceCPULimits {
			r.CpuQuota = -1
		}
	}
	return r
}

func containerSecurityContext(pod *corev1.Pod, c *corev1.Container, seccompRoot string) *runtimeapi.LinuxContainerSecurityContext {
	sc := &runtimeapi.LinuxContainerSecurityContext{NamespaceOptions: namespaceOptions(pod)}
	if psc := pod.Spec.SecurityContext; psc != nil {
		if psc.RunAsUser != nil {
			sc.RunAsUser = &runtimeapi.Int64Value{Value: *psc.RunAsUser}
		}
		if psc.RunAsGroup != nil {
			sc.RunAsGroup = &runtimeapi.Int64Value{Value: *psc.RunAsGroup}
		}
		sc.SupplementalGroups = supplementalGroups(psc)
		sc.SupplementalGroupsPolicy = supplementalGroupsPolicy(psc)
		sc.SelinuxOptions = seLinuxOption(psc.SELinuxOptions)
	}
	// The kubelet's default masked and read-only /proc and /sys paths,
	// unless the container asks for an unmasked /proc (the runtime drops
	// them for privileged containers).
	if csc := c.SecurityContext; csc == nil || csc.ProcMount == nil || *csc.ProcMount != corev1.UnmaskedProcMount {
		sc.MaskedPaths, sc.ReadonlyPaths = slices.Clone(defaultMaskedPaths), slices.Clone(defaultReadonlyPaths)
	}
	sc.Seccomp = seccompProfile(pod, c, seccompRoot)
	sc.Apparmor = appArmorProfile(pod, c)
	csc := c.SecurityContext
	if csc == nil {
		return sc
	}
	if csc.RunAsUser != nil {
		sc.RunAsUser = &runtimeapi.Int64Value{Value: *csc.RunAsUser}
	}
	if csc.RunAsGroup != nil {
		sc.RunAsGroup = &runtimeapi.Int64Value{Value: *csc.RunAsGroup}
	}
	if csc.SELinuxOptions != nil {
		sc.SelinuxOptions = seLinuxOption(csc.SELinuxOptions)
	}
	if csc.Privileged != nil {
		sc.Privileged = *csc.Privileged
	}
	if csc.ReadOnlyRootFilesystem != nil {
		sc.ReadonlyRootfs = *csc.ReadOnlyRootFilesystem
	}
	if csc.AllowPrivilegeEscalation != nil {
		sc.NoNewPrivs = !*csc.AllowPrivilegeEscalation
	}
	if caps := csc.Capabilities; caps != nil {
		sc.Capabilities = &runtimeapi.Capability{}
		for _, a := range caps.Add {
			sc.Capabilities.AddCapabilities = append(sc.Capabilities.AddCapabilities, string(a))
		}
		for _, d := range caps.Drop {
			sc.Capabilities.DropCapabilities = append(sc.Capabilities.DropCapabilities, string(d))
		}
	}
	return sc
}

// defaultMaskedPaths and defaultReadonlyPaths are the kubelet's
// (pkg/securitycontext): what a container must not read, or not write.
var (
	defaultMaskedPaths = []string{"/proc/asound", "/proc/acpi", "/proc/kcore", "/proc/keys", "/proc/latency_stats",
		"/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/proc/scsi", "/sys/firmware", "/sys/devices/virtual/powercap"}
	defaultReadonlyPaths = []string{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"}
)

// seccompProfile is the container's seccomp profile, else the pod's; none
// is unconfined (the kubelet without seccompDefault).
func seccompProfile(pod *corev1.Pod, c *corev1.Container, root string) *runtimeapi.SecurityProfile {
	var p *corev1.SeccompProfile
	if psc := pod.Spec.SecurityContext; psc != nil {
		p = psc.SeccompProfile
	}
	if c.SecurityContext != nil && c.SecurityContext.SeccompProfile != nil {
		p = c.SecurityContext.SeccompProfile
	}
	if p == nil {
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined}
	}
	switch p.Type {
	case corev1.SeccompProfileTypeRuntimeDefault:
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}
	case corev1.SeccompProfileTypeLocalhost:
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost,
			LocalhostRef: filepath.Join(root, ptrString(p.LocalhostProfile))}
	}
	return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined}
}

// appArmorProfile is the container's AppArmor profile (field, else the
// deprecated annotation), else the pod's; nil leaves the runtime's default.
func appArmorProfile(pod *corev1.Pod, c *corev1.Container) *runtimeapi.SecurityProfile {
	var p *corev1.AppArmorProfile
	if psc := pod.Spec.SecurityContext; psc != nil {
		p = psc.AppArmorProfile
	}
	if v, ok := pod.Annotations[corev1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix+c.Name]; ok {
		switch {
		case v == corev1.DeprecatedAppArmorBetaProfileRuntimeDefault:
			p = &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeRuntimeDefault}
		case v == corev1.DeprecatedAppArmorBetaProfileNameUnconfined:
			p = &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeUnconfined}
		case strings.HasPrefix(v, corev1.DeprecatedAppArmorBetaProfileNamePrefix):
			name := strings.TrimPrefix(v, corev1.DeprecatedAppArmorBetaProfileNamePrefix)
			p = &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeLocalhost, LocalhostProfile: &name}
		}
	}
	if c.SecurityContext != nil && c.SecurityContext.AppArmorProfile != nil {
		p = c.SecurityContext.AppArmorProfile
	}
	if p == nil {
		return nil
	}
	switch p.Type {
	case corev1.AppArmorProfileTypeRuntimeDefault:
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}
	case corev1.AppArmorProfileTypeLocalhost:
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost, LocalhostRef: ptrString(p.LocalhostProfile)}
	}
	return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined}
}

func ptrString(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// isCritical: static pods are critical to the kubelet, and so to the agent.
func isCritical(pod *corev1.Pod) bool { return !source.FromAPI(pod) }

// containerHash identifies a container spec (annotation only, for tools).
func containerHash(c *corev1.Container) uint32 {
	h := fnv.New32a()
	b, _ := json.Marshal(c)
	h.Write(b)
	return h.Sum32()
}
