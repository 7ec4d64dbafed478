package criconfig

import (
	"bufio"
	"fmt"
	"os"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"nodeagent/cri"
	"nodeagent/internal/layout"
	"nodeagent/internal/sysctl"
)

// LogDir is the kubelet's pod log directory: <podLogsDir>/<ns>_<name>_<uid>.
func LogDir(root string, pod *corev1.Pod) string {
	return layout.Logs(root).Pod(pod.Namespace, pod.Name, pod.UID)
}

// Sandbox builds the PodSandboxConfig as the kubelet does: metadata
// with the attempt counter, hostname, log directory, DNS, host port
// mappings, labels and annotations, the pod cgroup as parent, the
// namespace options and the pod's resources and overhead.
func (b *Builder) Sandbox(plan *Plan, attempt uint32) (*runtimeapi.PodSandboxConfig, error) {
	pod, cgroupParent := plan.Pod, plan.CgroupParent
	labels := map[string]string{}
	for k, v := range pod.Labels {
		labels[k] = v
	}
	labels[cri.LabelPodName] = pod.Name
	labels[cri.LabelPodNamespace] = pod.Namespace
	labels[cri.LabelPodUID] = string(pod.UID)
	labels[cri.LabelManagedBy] = b.opts.NodeName

	annotations := map[string]string{}
	for k, v := range pod.Annotations {
		annotations[k] = v
	}
	annotations[cri.AnnotationPodQOSClass] = string(plan.QOS)
	annotations[cri.AnnotationPodCgroup] = cgroupParent

	dns, err := b.dnsConfig(pod)
	if err != nil {
		return nil, err
	}
	cfg := &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: pod.Name, Namespace: pod.Namespace, Uid: string(pod.UID), Attempt: attempt},
		LogDirectory: LogDir(b.opts.PodLogsDir, pod),
		DnsConfig:    dns,
		PortMappings: portMappings(pod),
		Labels:       labels,
		Annotations:  annotations,
		Linux: &runtimeapi.LinuxPodSandboxConfig{
			CgroupParent: cgroupParent,
			SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
				NamespaceOptions: namespaceOptions(pod),
				Privileged:       anyPrivileged(pod),
				Seccomp:          &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault},
			},
			Sysctls:   sysctls(pod),
			Overhead:  b.SandboxOverhead(pod),
			Resources: b.SandboxResources(pod),
		},
	}
	cfg.Linux.SecurityContext.NamespaceOptions.UsernsOptions = plan.UserNamespace
	if !pod.Spec.HostNetwork {
		if cfg.Hostname, err = kernelHostname(pod, b.opts.ClusterDomain); err != nil {
			return nil, err
		}
	}
	if sc := pod.Spec.SecurityContext; sc != nil {
		if sc.RunAsUser != nil {
			cfg.Linux.SecurityContext.RunAsUser = &runtimeapi.Int64Value{Value: *sc.RunAsUser}
		}
		if sc.RunAsGroup != nil {
			cfg.Linux.SecurityContext.RunAsGroup = &runtimeapi.Int64Value{Value: *sc.RunAsGroup}
		}
		cfg.Linux.SecurityContext.SupplementalGroups = supplementalGroups(sc)
		cfg.Linux.SecurityContext.SupplementalGroupsPolicy = supplementalGroupsPolicy(sc)
		cfg.Linux.SecurityContext.SelinuxOptions = seLinuxOption(sc.SELinuxOptions)
	}
	return cfg, nil
}

// supplementalGroupsPolicy is the pod's for the runtime: Strict leaves
// out the groups the image's /etc/group gives the user (GA 1.35).
func supplementalGroupsPolicy(sc *corev1.PodSecurityContext) runtimeapi.SupplementalGroupsPolicy {
	if p := sc.SupplementalGroupsPolicy; p != nil && *p == corev1.SupplementalGroupsPolicyStrict {
		return runtimeapi.SupplementalGroupsPolicy_Strict
	}
	return runtimeapi.SupplementalGroupsPolicy_Merge
}

// seLinuxOption is the pod's or container's SELinux label for the
// runtime, which applies it where SELinux is enabled.
func seLinuxOption(o *corev1.SELinuxOptions) *runtimeapi.SELinuxOption {
	if o == nil {
		return nil
	}
	return &runtimeapi.SELinuxOption{User: o.User, Role: o.Role, Type: o.Type, Level: o.Level}
}

// podHostname is spec.hostnameOverride (1.37), else spec.hostname, else
// the pod name, cut to the 63 characters a hostname may hold (without a
// trailing '-' or '.') as the kubelet's truncatePodHostnameIfNeeded.
func podHostname(pod *corev1.Pod) string {
	if o := pod.Spec.HostnameOverride; o != nil {
		return truncateHostname(*o)
	}
	if pod.Spec.Hostname != "" {
		return pod.Spec.Hostname
	}
	return truncateHostname(pod.Name)
}

func truncateHostname(h string) string {
	if len(h) > 63 {
		h = strings.TrimRight(h[:63], "-.")
	}
	return h
}

// podDomain is the pod's DNS domain when it sets spec.subdomain:
// <subdomain>.<namespace>.svc.<cluster domain>, as the kubelet's.
func podDomain(pod *corev1.Pod, clusterDomain string) string {
	if pod.Spec.Subdomain == "" || pod.Spec.HostnameOverride != nil {
		return ""
	}
	return fmt.Sprintf("%s.%s.svc.%s", pod.Spec.Subdomain, pod.Namespace, clusterDomain)
}

// fqdnMaxLen is the kernel's nodename field less its terminating NUL.
const fqdnMaxLen = 64

// kernelHostname is the sandbox's hostname: the pod's, or with
// setHostnameAsFQDN and a subdomain its FQDN, which must fit the kernel's
// field (the kubelet's GetNodenameForKernel, with its words).
func kernelHostname(pod *corev1.Pod, clusterDomain string) (string, error) {
	h, domain := podHostname(pod), podDomain(pod, clusterDomain)
	if domain == "" || pod.Spec.SetHostnameAsFQDN == nil || !*pod.Spec.SetHostnameAsFQDN {
		return h, nil
	}
	fqdn := h + "." + domain
	if len(fqdn) > fqdnMaxLen {
		return "", fmt.Errorf("failed to construct FQDN from pod hostname and cluster domain, FQDN %s is too long (%d characters is the max, %d characters requested)", fqdn, fqdnMaxLen, len(fqdn))
	}
	return fqdn, nil
}

func namespaceOptions(pod *corev1.Pod) *runtimeapi.NamespaceOption {
	ns := &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_POD, Pid: runtimeapi.NamespaceMode_CONTAINER, Ipc: runtimeapi.NamespaceMode_POD}
	if pod.Spec.HostNetwork {
		ns.Network = runtimeapi.NamespaceMode_NODE
	}
	if pod.Spec.HostIPC {
		ns.Ipc = runtimeapi.NamespaceMode_NODE
	}
	switch {
	case pod.Spec.HostPID:
		ns.Pid = runtimeapi.NamespaceMode_NODE
	case pod.Spec.ShareProcessNamespace != nil && *pod.Spec.ShareProcessNamespace:
		ns.Pid = runtimeapi.NamespaceMode_POD
	}
	return ns
}

func anyPrivileged(pod *corev1.Pod) bool {
	for _, c := range append(append([]corev1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...) {
		if c.SecurityContext != nil && c.SecurityContext.Privileged != nil && *c.SecurityContext.Privileged {
			return true
		}
	}
	return false
}

// supplementalGroups are the pod's, plus its fsGroup: its volumes' files
// belong to that group, and its users read them as members.
func supplementalGroups(sc *corev1.PodSecurityContext) []int64 {
	groups := slices.Clone(sc.SupplementalGroups)
	if sc.FSGroup != nil && !slices.Contains(groups, *sc.FSGroup) {
		groups = append(groups, *sc.FSGroup)
	}
	return groups
}

func sysctls(pod *corev1.Pod) map[string]string {
	if pod.Spec.SecurityContext == nil || len(pod.Spec.SecurityContext.Sysctls) == 0 {
		return nil
	}
	out := map[string]string{}
	for _, s := range pod.Spec.SecurityContext.Sysctls {
		out[sysctl.Dots(s.Name)] = s.Value // the runtime takes dotted names
	}
	return out
}

// portMappings maps every container port that asks for a hostPort.
func portMappings(pod *corev1.Pod) []*runtimeapi.PortMapping {
	var out []*runtimeapi.PortMapping
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			if p.HostPort <= 0 {
				continue
			}
			proto := runtimeapi.Protocol_TCP
			switch p.Protocol {
			case corev1.ProtocolUDP:
				proto = runtimeapi.Protocol_UDP
			case corev1.ProtocolSCTP:
				proto = runtimeapi.Protocol_SCTP
			}
			out = append(out, &runtimeapi.PortMapping{Protocol: proto, ContainerPort: p.ContainerPort, HostPort: p.HostPort, HostIp: p.HostIP})
		}
	}
	return out
}

// DNS limits the kubelet applies to a pod's resolv.conf.
const (
	maxDNSNameservers = 3
	maxDNSSearches    = 32
)

// dnsConfig follows the kubelet's dnsPolicy rules: ClusterFirst uses the
// cluster DNS with the cluster search path (falling back to the host's
// resolv.conf when no clusterDNS is configured, as the kubelet does),
// Default uses the host's resolv.conf, None only spec.dnsConfig; spec.dnsConfig
// is merged into all of them.
func (b *Builder) dnsConfig(pod *corev1.Pod) (*runtimeapi.DNSConfig, error) {
	policy := pod.Spec.DNSPolicy
	if policy == corev1.DNSClusterFirst && pod.Spec.HostNetwork {
		policy = corev1.DNSDefault
	}
	if (policy == corev1.DNSClusterFirst || policy == corev1.DNSClusterFirstWithHostNet) && len(b.opts.ClusterDNS) == 0 {
		policy = corev1.DNSDefault
	}
	cfg := &runtimeapi.DNSConfig{}
	switch policy {
	case corev1.DNSClusterFirst, corev1.DNSClusterFirstWithHostNet:
		host, err := readResolvConf(b.opts.ResolvConf)
		if err != nil {
			return nil, err
		}
		cfg.Servers = append(cfg.Servers, b.opts.ClusterDNS...)
		if d := b.opts.ClusterDomain; d != "" {
			cfg.Searches = []string{pod.Namespace + ".svc." + d, "svc." + d, d}
		}
		cfg.Searches = append(cfg.Searches, host.Searches...)
		cfg.Options = []string{"ndots:5"}
	case corev1.DNSDefault:
		host, err := readResolvConf(b.opts.ResolvConf)
		if err != nil {
			return nil, err
		}
		cfg = host
	}
	if extra := pod.Spec.DNSConfig; extra != nil {
		cfg.Servers = append(cfg.Servers, extra.Nameservers...)
		cfg.Searches = append(cfg.Searches, extra.Searches...)
		for _, o := range extra.Options {
			opt := o.Name
			if o.Value != nil {
				opt += ":" + *o.Value
			}
			cfg.Options = mergeOption(cfg.Options, opt)
		}
	}
	cfg.Servers = dedupe(cfg.Servers, maxDNSNameservers)
	cfg.Searches = dedupe(cfg.Searches, maxDNSSearches)
	return cfg, nil
}

// readResolvConf reads nameservers, search domains and options; an empty
// path means no host DNS.
func readResolvConf(path string) (*runtimeapi.DNSConfig, error) {
	cfg := &runtimeapi.DNSConfig{}
	if path == "" {
		return cfg, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read resolvConf %s: %w", path, err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) < 2 || strings.HasPrefix(fields[0], "#") || strings.HasPrefix(fields[0], ";") {
			continue
		}
		switch fields[0] {
		case "nameserver":
			cfg.Servers = append(cfg.Servers, fields[1])
		case "search", "domain":
			cfg.Searches = append(cfg.Searches, fields[1:]...)
		case "options":
			cfg.Options = append(cfg.Options, fields[1:]...)
		}
	}
	return cfg, s.Err()
}

// mergeOption adds opt, replacing an option of the same name.
func mergeOption(opts []string, opt string) []string {
	name, _, _ := strings.Cut(opt, ":")
	for i, o := range opts {
		if n, _, _ := strings.Cut(o, ":"); n == name {
			opts[i] = opt
			return opts
		}
	}
	return append(opts, opt)
}

func dedupe(in []string, max int) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range in {
		if s == "" || seen[s] {
			continue
		}
		seen[s] = true
		out = append(out, s)
	}
	if len(out) > max {
		out = out[:max]
	}
	return out
}
