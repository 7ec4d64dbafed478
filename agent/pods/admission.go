package pods

import (
	"fmt"
	"maps"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilversion "k8s.io/apimachinery/pkg/util/version"
	ndf "k8s.io/component-helpers/nodedeclaredfeatures"

	"nodeagent/agent/events"
	"nodeagent/internal/qos"
	"nodeagent/internal/sat"
	"nodeagent/internal/sysctl"
	"nodeagent/internal/version"
)

// Rejection is why a pod was not admitted, in the kubelet's words.
type Rejection struct {
	Reason  string // OutOfpods, OutOfcpu, OutOfmemory, OutOfephemeral-storage
	Message string
}

// admit checks pod against what the admitted pods already use, as the
// kubelet's resource predicate does: the pod count against maxPods, and
// each requested resource against allocatable (capacity minus reservations
// and the hard eviction threshold).
// Extended resources count when a device plugin serves them (extended,
// their allocatable); others are left to whoever advertises them, as the
// kubelet drops extended resources its node does not have.
func admit(pod *corev1.Pod, admitted []*corev1.Pod, maxPods int, allocatable, extended corev1.ResourceList) *Rejection {
	if len(admitted)+1 > maxPods {
		return &Rejection{Reason: "OutOfpods", Message: fmt.Sprintf(
			"Node didn't have enough resource: pods, requested: 1, used: %d, capacity: %d", len(admitted), maxPods)}
	}
	requested := qos.PodRequests(pod)
	used := corev1.ResourceList{}
	for _, p := range admitted {
		for name, q := range qos.PodRequests(p) {
			sum := used[name]
			sum.Add(q)
			used[name] = sum
		}
	}
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage} {
		req, capacity := requested[name], allocatable[name]
		if req.IsZero() || capacity.IsZero() {
			continue
		}
		if r := fits(name, req, used[name], capacity); r != nil {
			return r
		}
	}
	for _, name := range slices.Sorted(maps.Keys(extended)) {
		if req := requested[name]; !req.IsZero() {
			if r := fits(name, req, used[name], extended[name]); r != nil {
				return r
			}
		}
	}
	return nil
}

// admitLocked runs the kubelet's admit handlers in its order: the CPU
// manager (the topology manager's handler), then the resource predicate,
// the OS, supplemental groups, sysctls and AppArmor.
func (m *Manager) admitLocked(p *corev1.Pod, extended corev1.ResourceList) *Rejection {
	checks := []func() *Rejection{
		func() *Rejection { return m.admitCPUsLocked(p) },
		func() *Rejection { return m.admitResourcesLocked(p, extended) },
		func() *Rejection { return osAdmit(p) },
		func() *Rejection { return supplementalGroupsAdmit(p, m.opts.StrictSupplementalGroups) },
		func() *Rejection { return sysctlAdmit(p, m.opts.AllowedUnsafeSysctls) },
		func() *Rejection { return appArmorAdmit(p, m.opts.AppArmor) },
	}
	for _, check := range checks {
		if r := check(); r != nil {
			return r
		}
	}
	return nil
}

// fits rejects a request that does not fit beside used within capacity.
func fits(name corev1.ResourceName, req, used, capacity resource.Quantity) *Rejection {
	r, u, c := amount(name, req), amount(name, used), amount(name, capacity)
	if sat.Add(r, u) > c {
		return &Rejection{Reason: "OutOf" + string(name), Message: fmt.Sprintf(
			"Node didn't have enough resource: %s, requested: %d, used: %d, capacity: %d", name, r, u, c)}
	}
	return nil
}

// amount is the unit the kubelet reports in: milli-CPU for cpu, else bytes.
func amount(name corev1.ResourceName, q resource.Quantity) int64 {
	if name == corev1.ResourceCPU {
		return sat.MilliValue(q)
	}
	return sat.Value(q)
}

// appArmorAdmit refuses a pod that asks for an AppArmor profile (field or
// the deprecated annotation, anything but unconfined) on a host without
// AppArmor, as the kubelet's AppArmor admission handler does: running it
// would silently drop the confinement the pod asked for.
func appArmorAdmit(pod *corev1.Pod, hostEnabled bool) *Rejection {
	if hostEnabled || !wantsAppArmor(pod) {
		return nil
	}
	return &Rejection{Reason: "AppArmor", Message: "Cannot enforce AppArmor: AppArmor is not enabled on the host"}
}

func wantsAppArmor(pod *corev1.Pod) bool {
	confined := func(p *corev1.AppArmorProfile) bool {
		return p != nil && p.Type != corev1.AppArmorProfileTypeUnconfined
	}
	if sc := pod.Spec.SecurityContext; sc != nil && confined(sc.AppArmorProfile) {
		return true
	}
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range list {
			if c.SecurityContext != nil && confined(c.SecurityContext.AppArmorProfile) {
				return true
			}
		}
	}
	for _, c := range pod.Spec.EphemeralContainers {
		if c.SecurityContext != nil && confined(c.SecurityContext.AppArmorProfile) {
			return true
		}
	}
	for k, v := range pod.Annotations {
		if strings.HasPrefix(k, corev1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix) && v != corev1.DeprecatedAppArmorBetaProfileNameUnconfined {
			return true
		}
	}
	return false
}

// AppArmorEnabled reports whether the host kernel enforces AppArmor (the
// module's enabled parameter, as runc reads it).
func AppArmorEnabled() bool {
	b, err := os.ReadFile("/sys/module/apparmor/parameters/enabled")
	return err == nil && strings.HasPrefix(string(b), "Y")
}

// kubeletRelease is the node's version as the framework compares it, read
// once from the build.
var kubeletRelease = sync.OnceValue(func() *utilversion.Version {
	return utilversion.MustParseSemantic(version.KubeletVersion())
})

// featureAdmit refuses a pod that needs node features (the
// NodeDeclaredFeatures framework's) the node does not declare, with the
// kubelet's reason and words: static pods and pods bound by name never
// met the scheduler's check.
func featureAdmit(pod *corev1.Pod, declared []string) *Rejection {
	fw := ndf.DefaultFramework
	need, err := fw.InferForPodScheduling(&ndf.PodInfo{Spec: &pod.Spec, Status: &pod.Status}, kubeletRelease())
	if err != nil {
		return nil
	}
	res, err := fw.MatchNodeFeatureSet(need, fw.TryMap(declared))
	if err != nil || res.IsMatch {
		return nil
	}
	return &Rejection{Reason: "PodFeatureUnsupported", Message: "Pod requires node features that are not available: " + strings.Join(res.UnsatisfiedRequirements, ", ")}
}

// osAdmit refuses a pod meant for another OS, by its nodeSelector or its
// spec.os, with the kubelet's reasons and words.
// supplementalGroupsAdmit refuses supplementalGroupsPolicy Strict on a
// runtime that cannot do it (it would run the pod with the image's groups
// too), in the kubelet's words.
func supplementalGroupsAdmit(pod *corev1.Pod, strictSupported bool) *Rejection {
	if sc := pod.Spec.SecurityContext; sc != nil && sc.SupplementalGroupsPolicy != nil &&
		*sc.SupplementalGroupsPolicy == corev1.SupplementalGroupsPolicyStrict && !strictSupported {
		return &Rejection{Reason: "SupplementalGroupsPolicyNotSupported", Message: "SupplementalGroupsPolicy=Strict is not supported in this node"}
	}
	return nil
}

func osAdmit(pod *corev1.Pod) *Rejection {
	if os, ok := pod.Spec.NodeSelector[corev1.LabelOSStable]; ok && os != runtime.GOOS {
		return &Rejection{Reason: "PodOSSelectorNodeLabelDoesNotMatch", Message: "Failed to admit pod as the `kubernetes.io/os` label doesn't match node label"}
	}
	if pod.Spec.OS != nil && string(pod.Spec.OS.Name) != runtime.GOOS {
		return &Rejection{Reason: "PodOSNotSupported", Message: "Failed to admit pod as the OS field doesn't match node OS"}
	}
	return nil
}

// safeSysctls are the sysctls every pod may set: namespaced and unable to
// harm other pods or the node (the kubelet's SafeSysctlAllowlist; this
// agent's kernels are newer than each one's minimum).
var safeSysctls = []string{
	"kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.tcp_syncookies", "net.ipv4.ping_group_range",
	"net.ipv4.ip_unprivileged_port_start", "net.ipv4.ip_local_reserved_ports", "net.ipv4.tcp_keepalive_time",
	"net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl", "net.ipv4.tcp_keepalive_probes",
	"net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem",
}

// sysctlAdmit refuses a pod with a sysctl neither safe nor in
// allowedUnsafeSysctls (a trailing * matches a prefix), or one of a
// namespace the pod shares with the host, with the kubelet's reason and
// words.
func sysctlAdmit(pod *corev1.Pod, allowedUnsafe []string) *Rejection {
	sc := pod.Spec.SecurityContext
	if sc == nil {
		return nil
	}
	for _, s := range sc.Sysctls {
		name := sysctl.Dots(s.Name)
		ns := sysctl.Namespace(name)
		switch {
		case ns == "ipc" && pod.Spec.HostIPC, ns == "net" && pod.Spec.HostNetwork:
			host := map[string]string{"ipc": "IPC", "net": "network"}[ns]
			return &Rejection{Reason: "SysctlForbidden", Message: fmt.Sprintf("forbidden sysctl: %q not allowed with host %s enabled", name, host)}
		case slices.Contains(safeSysctls, name) || sysctlAllowed(name, allowedUnsafe):
		default:
			return &Rejection{Reason: "SysctlForbidden", Message: fmt.Sprintf("forbidden sysctl: %q not allowlisted", name)}
		}
	}
	return nil
}

func sysctlAllowed(name string, patterns []string) bool {
	for _, p := range patterns {
		if p == name || strings.HasSuffix(p, "*") && strings.HasPrefix(name, strings.TrimSuffix(p, "*")) {
			return true
		}
	}
	return false
}

// admittedLocked are the admitted pods that count: not on their way out.
func (m *Manager) admittedLocked() []*corev1.Pod {
	out := make([]*corev1.Pod, 0, len(m.pods))
	for uid, p := range m.pods {
		if !m.leftLocked(uid) {
			out = append(out, p)
		}
	}
	return out
}

// rejectLocked leaves a refused pod Failed with the reason, as the
// kubelet's rejectPod, with its event.
func (m *Manager) rejectLocked(p *corev1.Pod, r *Rejection) {
	m.log.Warn("pod rejected at admission", "pod", fullName(p), "pod_uid", p.UID, "reason", r.Reason, "message", r.Message)
	m.events.Event(events.PodRef(p, ""), corev1.EventTypeWarning, r.Reason, "Pod was rejected: "+r.Message)
	pod := p.DeepCopy()
	now := metav1.NewTime(m.clock.Now())
	pod.Status = corev1.PodStatus{
		Phase:     corev1.PodFailed,
		Reason:    r.Reason,
		Message:   "Pod was rejected: " + r.Message,
		QOSClass:  qos.Class(p),
		HostIP:    m.opts.NodeIP,
		StartTime: &now,
	}
	m.store.Set(pod)
}
