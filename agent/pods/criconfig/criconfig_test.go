package criconfig

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"k8s.io/utils/ptr"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"nodeagent/cri"
	"nodeagent/internal/qos"
	"nodeagent/probes"
)

// fakeHost hands out paths under a temporary directory and records what it
// was asked to make.
type fakeHost struct {
	dir   string
	made  []string
	hosts map[string]string // pod UID -> hosts file content
	files map[string]string // "<volume>/<path>" -> content
}

func (h *fakeHost) VolumeFile(pod *corev1.Pod, volume, path string, limit int64) ([]byte, error) {
	c, ok := h.files[volume+"/"+path]
	if !ok {
		return nil, os.ErrNotExist
	}
	return []byte(c), nil
}

func (h *fakeHost) Volume(pod *corev1.Pod, name string) (string, bool, error) {
	h.made = append(h.made, "volume "+name)
	for _, v := range pod.Spec.Volumes {
		if v.Name != name {
			continue
		}
		if v.HostPath != nil {
			return v.HostPath.Path, false, nil
		}
		return filepath.Join(h.dir, string(pod.UID), "volumes", name), v.ConfigMap != nil, nil
	}
	return "", false, errors.New("not set up")
}

func (h *fakeHost) SubPath(pod *corev1.Pod, volume, container string, index int, volumePath, sub string) (string, error) {
	h.made = append(h.made, "subPath "+volumePath+" "+sub)
	return filepath.Join(h.dir, string(pod.UID), "subpaths", volume, container), nil
}

func (h *fakeHost) HostsFile(pod *corev1.Pod, content []byte) (string, error) {
	h.hosts[string(pod.UID)] = string(content)
	return filepath.Join(h.dir, string(pod.UID), "etc-hosts"), nil
}

func (h *fakeHost) TerminationMessageFile(pod *corev1.Pod, container string) (string, error) {
	h.made = append(h.made, "termination "+container)
	return filepath.Join(h.dir, string(pod.UID), "containers", container, "msg"), nil
}

func testBuilder(t testing.TB, opts Options) (*Builder, *fakeHost) {
	if opts.NodeName == "" {
		opts.NodeName = "node"
	}
	host := &fakeHost{dir: t.TempDir(), hosts: map[string]string{}}
	return New(opts, host, nil), host
}

func testPod(policy corev1.RestartPolicy, names ...string) *corev1.Pod {
	pod := &corev1.Pod{}
	pod.Name, pod.Namespace, pod.UID = "p-node", "default", "uid1"
	pod.Spec.RestartPolicy = policy
	pod.Spec.DNSPolicy = corev1.DNSClusterFirst // the API default: pods reach the builder defaulted
	for _, n := range names {
		pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: n, Image: "img"})
	}
	return pod
}

func TestDNSConfig(t *testing.T) {
	resolv := filepath.Join(t.TempDir(), "resolv.conf")
	os.WriteFile(resolv, []byte("# comment\nnameserver 192.0.2.53\nsearch corp.example\noptions edns0\n"), 0o644)
	pod := testPod(corev1.RestartPolicyAlways, "a")

	pod.Spec.DNSPolicy = corev1.DNSClusterFirst
	b, _ := testBuilder(t, Options{ResolvConf: resolv})
	cfg, err := b.dnsConfig(pod)
	if err != nil || strings.Join(cfg.Servers, ",") != "192.0.2.53" || strings.Join(cfg.Options, ",") != "edns0" {
		t.Errorf("ClusterFirst without clusterDNS falls back to the host: %+v %v", cfg, err)
	}
	b, _ = testBuilder(t, Options{ResolvConf: resolv, ClusterDNS: []string{"10.96.0.10"}, ClusterDomain: "cluster.local"})
	cfg, _ = b.dnsConfig(pod)
	if strings.Join(cfg.Servers, ",") != "10.96.0.10" || strings.Join(cfg.Searches, ",") != "default.svc.cluster.local,svc.cluster.local,cluster.local,corp.example" || strings.Join(cfg.Options, ",") != "ndots:5" {
		t.Errorf("ClusterFirst: %+v", cfg)
	}
	pod.Spec.DNSPolicy = corev1.DNSNone
	two := "2"
	pod.Spec.DNSConfig = &corev1.PodDNSConfig{Nameservers: []string{"1.1.1.1"}, Searches: []string{"a.example"}, Options: []corev1.PodDNSConfigOption{{Name: "ndots", Value: &two}}}
	cfg, _ = b.dnsConfig(pod)
	if strings.Join(cfg.Servers, ",") != "1.1.1.1" || strings.Join(cfg.Searches, ",") != "a.example" || strings.Join(cfg.Options, ",") != "ndots:2" {
		t.Errorf("None: %+v", cfg)
	}
	pod.Spec.DNSPolicy = corev1.DNSDefault
	pod.Spec.DNSConfig = &corev1.PodDNSConfig{Options: []corev1.PodDNSConfigOption{{Name: "edns0"}, {Name: "ndots", Value: &two}}}
	cfg, _ = b.dnsConfig(pod)
	if strings.Join(cfg.Options, ",") != "edns0,ndots:2" {
		t.Errorf("Default merged options: %+v", cfg.Options)
	}
	b, _ = testBuilder(t, Options{ResolvConf: "/nonexistent/resolv.conf"})
	if _, err := b.dnsConfig(pod); err == nil || !strings.Contains(err.Error(), "/nonexistent/resolv.conf") {
		t.Errorf("missing resolv.conf: %v", err)
	}
}

func TestContainerConfig(t *testing.T) {
	b, host := testBuilder(t, Options{NodeName: "n1", NodeIP: "192.0.2.1", MemoryCapacity: 16 << 30, OOMRange: qos.OOMScoreRange{Min: 0}, EnforceCPULimits: true, CPUPeriod: 100000})
	pod := testPod(corev1.RestartPolicyAlways, "web")
	pod.Labels = map[string]string{"app": "web"}
	c := &pod.Spec.Containers[0]
	c.TerminationMessagePath = "/dev/termination-log"
	c.Command = []string{"sh", "-c", "echo $(GREETING) from $(POD) at $(IP)"}
	c.Env = []corev1.EnvVar{
		{Name: "POD", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
		{Name: "IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
		{Name: "GREETING", Value: "hi-$(POD)"},
		{Name: "APP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels['app']"}}},
		{Name: "MEM", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.memory", Divisor: resource.MustParse("1Mi")}}},
	}
	c.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("1Gi")}
	c.Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("2Gi")}

	cfg, err := b.Container(context.Background(), NewPlan(pod, ""), c, "sha256:img", 3, "10.88.0.7")
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, kv := range cfg.Envs {
		env[kv.Key] = string(kv.Value)
	}
	if env["POD"] != "p-node" || env["IP"] != "10.88.0.7" || env["GREETING"] != "hi-p-node" || env["APP"] != "web" || env["MEM"] != "2048" {
		t.Errorf("env = %v", env)
	}
	if got := strings.Join(cfg.Command, " "); got != "sh -c echo hi-p-node from p-node at 10.88.0.7" {
		t.Errorf("command = %q", got)
	}
	r := cfg.Linux.Resources
	// Burstable with a 1Gi request on 16Gi: 1000 - 62 = 938, allowed as is.
	if r.CpuShares != 256 || r.CpuQuota != 50000 || r.CpuPeriod != 100000 || r.MemoryLimitInBytes != 2<<30 || r.OomScoreAdj != 938 {
		t.Errorf("resources = %+v", r)
	}
	if cfg.LogPath != "web/3.log" || cfg.Metadata.Attempt != 3 || cfg.Image.Image != "sha256:img" || cfg.Image.UserSpecifiedImage != "img" {
		t.Errorf("log path %q attempt %d image %+v", cfg.LogPath, cfg.Metadata.Attempt, cfg.Image)
	}
	var message *runtimeapi.Mount
	for _, mnt := range cfg.Mounts {
		if mnt.ContainerPath == "/dev/termination-log" {
			message = mnt
		}
	}
	if message == nil || cfg.Annotations[cri.AnnotationTerminationMessageFile] != message.HostPath {
		t.Fatalf("termination message file not mounted: %+v", cfg.Mounts)
	}
	if message.HostPath != filepath.Join(host.dir, "uid1", "containers", "web", "msg") {
		t.Errorf("message file %s is not the one the host made", message.HostPath)
	}
	if !strings.Contains(host.hosts["uid1"], "10.88.0.7\tp-node\n") {
		t.Errorf("hosts file handed to the host:\n%s", host.hosts["uid1"])
	}
	if cfg.Labels[cri.LabelManagedBy] != "n1" || cfg.Labels[cri.LabelPodUID] != "uid1" || cfg.Annotations[cri.AnnotationRestartCount] != "3" {
		t.Errorf("labels %v annotations %v", cfg.Labels, cfg.Annotations)
	}

	if r.Unified != nil {
		t.Errorf("memory.oom.group set without OOMGroupKill: %v", r.Unified)
	}
	b.opts.OOMGroupKill = true
	if cfg, _ := b.Container(context.Background(), NewPlan(pod, ""), c, "sha256:img", 0, ""); cfg.Linux.Resources.Unified["memory.oom.group"] != "1" {
		t.Errorf("unified %v: want memory.oom.group=1 on cgroup v2", cfg.Linux.Resources.Unified)
	}
	b.opts.OOMGroupKill = false

	// memoryQoS, 1.37: under None no protection (both zeroed) and, with a
	// factor, memory.high 0.9 of the way from the 1Gi request to the 2Gi
	// limit, rounded down to a page; without a factor no memory.high.
	b.opts.MemoryQoS, b.opts.MemoryThrottlingFactor = true, ptr.To(0.9)
	cfg, _ = b.Container(context.Background(), NewPlan(pod, ""), c, "sha256:img", 0, "")
	page := int64(os.Getpagesize())
	gi := float64(1 << 30)
	wantHigh := int64(gi+0.9*gi) / page * page // 1Gi + 0.9 × (2Gi - 1Gi)
	if u := cfg.Linux.Resources.Unified; u["memory.min"] != "0" || u["memory.low"] != "0" || u["memory.high"] != strconv.FormatInt(wantHigh, 10) {
		t.Errorf("memoryQoS (None) unified %v, want memory.min and memory.low 0, memory.high %d", u, wantHigh)
	}
	// TieredReservation: a Burstable container's request is memory.low.
	b.opts.TieredMemory, b.opts.MemoryThrottlingFactor = true, nil
	cfg, _ = b.Container(context.Background(), NewPlan(pod, ""), c, "sha256:img", 0, "")
	if u := cfg.Linux.Resources.Unified; u["memory.low"] != "1073741824" || u["memory.min"] != "" || u["memory.high"] != "" {
		t.Errorf("memoryQoS (TieredReservation, no factor) unified %v, want memory.low 1073741824 and neither memory.min nor memory.high", u)
	}
	b.opts.MemoryQoS, b.opts.TieredMemory = false, false

	// Guaranteed on a host that refuses negative scores gets the floor.
	c.Resources.Requests = c.Resources.Limits.DeepCopy()
	cfg, _ = b.Container(context.Background(), NewPlan(pod, ""), c, "sha256:img", 0, "")
	if cfg.Linux.Resources.OomScoreAdj != 0 {
		t.Errorf("guaranteed oom_score_adj %d, want 0 (host floor)", cfg.Linux.Resources.OomScoreAdj)
	}
	// TieredReservation: a Guaranteed container's request is memory.min,
	// and no memory.high even with a factor (request = limit).
	b.opts.MemoryQoS, b.opts.TieredMemory, b.opts.MemoryThrottlingFactor = true, true, ptr.To(0.9)
	cfg, _ = b.Container(context.Background(), NewPlan(pod, ""), c, "sha256:img", 0, "")
	if u := cfg.Linux.Resources.Unified; u["memory.min"] != "2147483648" || u["memory.low"] != "" || u["memory.high"] != "" {
		t.Errorf("memoryQoS (TieredReservation) guaranteed unified %v, want memory.min 2147483648 only", u)
	}
}

func TestSandboxConfig(t *testing.T) {
	b, _ := testBuilder(t, Options{NodeName: "n1", PodLogsDir: "/var/log/pods"})
	pod := testPod(corev1.RestartPolicyAlways, "a")
	pod.Spec.DNSPolicy = corev1.DNSNone
	pod.Spec.DNSConfig = &corev1.PodDNSConfig{Nameservers: []string{"1.1.1.1"}}
	pod.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 80, HostPort: 8080, Protocol: corev1.ProtocolTCP}, {ContainerPort: 81}}
	cfg, err := b.Sandbox(NewPlan(pod, "/kubepods/besteffort/poduid1"), 2)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Metadata.Attempt != 2 || cfg.Hostname != "p-node" || cfg.LogDirectory != "/var/log/pods/default_p-node_uid1" || cfg.Linux.CgroupParent != "/kubepods/besteffort/poduid1" {
		t.Errorf("sandbox config %+v", cfg)
	}
	if len(cfg.PortMappings) != 1 || cfg.PortMappings[0].HostPort != 8080 || cfg.PortMappings[0].ContainerPort != 80 {
		t.Errorf("port mappings %+v", cfg.PortMappings)
	}
	if cfg.Labels[cri.LabelPodName] != "p-node" || cfg.Labels[cri.LabelManagedBy] != "n1" {
		t.Errorf("labels %v", cfg.Labels)
	}
	pod.Spec.HostNetwork = true
	cfg, _ = b.Sandbox(NewPlan(pod, ""), 0)
	if cfg.Hostname != "" || cfg.Linux.SecurityContext.NamespaceOptions.Network != runtimeapi.NamespaceMode_NODE {
		t.Errorf("hostNetwork: hostname %q ns %v", cfg.Hostname, cfg.Linux.SecurityContext.NamespaceOptions)
	}
	long := testPod(corev1.RestartPolicyAlways, "a")
	long.Name = strings.Repeat("a", 62) + "-b"
	if h := podHostname(long); len(h) != 62 || strings.HasSuffix(h, "-") {
		t.Errorf("hostname %q must be cut to 63 without a trailing '-'", h)
	}
}

func TestHostsFile(t *testing.T) {
	pod := testPod(corev1.RestartPolicyAlways, "a")
	pod.Spec.HostAliases = []corev1.HostAlias{{IP: "192.0.2.10", Hostnames: []string{"db", "db.local"}}}
	got := string(hostsFileContent(pod, "10.88.0.5", "", ""))
	for _, want := range []string{"# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n", "10.88.0.5\tp-node\n", "\n# Entries added by HostAliases.\n192.0.2.10\tdb\tdb.local\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("hosts file lacks %q:\n%s", want, got)
		}
	}
	pod.Spec.HostNetwork = true
	got = string(hostsFileContent(pod, "", "", "127.0.0.1 localhost myhost"))
	if !strings.HasPrefix(got, "# Kubernetes-managed hosts file (host network).\n127.0.0.1 localhost myhost\n") || strings.Contains(got, "ip6-allnodes") {
		t.Errorf("host network hosts file:\n%s", got)
	}
	if mountsEtcHosts(&corev1.Container{VolumeMounts: []corev1.VolumeMount{{MountPath: "/etc/hosts/"}}}) {
		t.Error("a container mounting its own /etc/hosts must keep it")
	}
}

func TestPreStopTravelsWithTheContainer(t *testing.T) {
	b, _ := testBuilder(t, Options{})
	pod := testPod(corev1.RestartPolicyAlways, "a")
	c := &pod.Spec.Containers[0]
	c.Ports = []corev1.ContainerPort{{Name: "web", ContainerPort: 8080}}
	c.Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/bye", Port: intstr.FromString("web")}}}
	cfg, err := b.Container(context.Background(), NewPlan(pod, ""), c, "img", 0, "10.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := cfg.Annotations[cri.AnnotationPreStopHandler]; !ok {
		t.Fatal("no preStop annotation")
	}
	got := SpecFromAnnotations("a", cfg.Annotations)
	if got == nil || got.Lifecycle.PreStop.HTTPGet.Path != "/bye" {
		t.Fatalf("rebuilt spec %+v", got)
	}
	if port, err := probes.ResolvePort(got.Lifecycle.PreStop.HTTPGet.Port, got); err != nil || port != 8080 {
		t.Errorf("named port from the annotations: %d %v", port, err)
	}
	if SpecFromAnnotations("a", map[string]string{}) != nil {
		t.Error("a container without a preStop annotation has no hook")
	}
}

func TestVolumeMountsAreMadeByTheHost(t *testing.T) {
	b, host := testBuilder(t, Options{})
	pod := testPod(corev1.RestartPolicyAlways, "a")
	dirOrCreate := corev1.HostPathDirectoryOrCreate
	pod.Spec.Volumes = []corev1.Volume{
		{Name: "cache", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: "data", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/srv/data", Type: &dirOrCreate}}},
	}
	c := &pod.Spec.Containers[0]
	c.Env = []corev1.EnvVar{{Name: "SHARD", Value: "s1"}}
	c.VolumeMounts = []corev1.VolumeMount{
		{Name: "cache", MountPath: "/cache"},
		{Name: "data", MountPath: "/data", ReadOnly: true, SubPathExpr: "shards/$(SHARD)"},
	}
	cfg, err := b.Container(context.Background(), NewPlan(pod, ""), c, "img", 0, "10.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"volume cache", "volume data", "subPath /srv/data shards/s1"}
	if strings.Join(host.made, ",") != strings.Join(want, ",") {
		t.Errorf("host made %q, want %q", host.made, want)
	}
	mounts := map[string]*runtimeapi.Mount{}
	for _, m := range cfg.Mounts {
		mounts[m.ContainerPath] = m
	}
	if m := mounts["/data"]; m == nil || !m.Readonly || m.HostPath != filepath.Join(host.dir, "uid1", "subpaths", "data", "a") {
		t.Errorf("/data mount %+v: want the host's subPath target, read-only", m)
	}
	if mounts["/etc/hosts"] == nil {
		t.Error("no managed /etc/hosts mount")
	}

	c.VolumeMounts[1].SubPathExpr = "$(SHARD)/../../etc"
	if _, err := b.Container(context.Background(), NewPlan(pod, ""), c, "img", 0, ""); err == nil || !strings.Contains(err.Error(), "subPathExpr") {
		t.Errorf("a subPathExpr expanding to a path with .. must be refused, got %v", err)
	}
}

func TestPlanCarriesTheQOSClass(t *testing.T) {
	b, _ := testBuilder(t, Options{})
	pod := testPod(corev1.RestartPolicyAlways, "a")
	pod.Spec.DNSPolicy = corev1.DNSNone
	cfg, err := b.Sandbox(NewPlan(pod, "/kubepods/besteffort/poduid1"), 0)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Annotations[cri.AnnotationPodQOSClass] != "BestEffort" || cfg.Annotations[cri.AnnotationPodCgroup] != "/kubepods/besteffort/poduid1" {
		t.Errorf("annotations %v", cfg.Annotations)
	}
}

func TestHostnameAsFQDN(t *testing.T) {
	pod := &corev1.Pod{}
	pod.Name, pod.Namespace = "web", "ns"
	pod.Spec.Subdomain = "t"
	if h, err := kernelHostname(pod, "cluster.local"); err != nil || h != "web" {
		t.Errorf("without setHostnameAsFQDN: %q %v", h, err)
	}
	yes := true
	pod.Spec.SetHostnameAsFQDN = &yes
	if h, err := kernelHostname(pod, "cluster.local"); err != nil || h != "web.t.ns.svc.cluster.local" {
		t.Errorf("FQDN: %q %v", h, err)
	}
	pod.Spec.Hostname = "hostfqdnveryveryveryverylongforfqdntobemorethan64bytes"
	if _, err := kernelHostname(pod, "cluster.local"); err == nil || !strings.HasPrefix(err.Error(), "failed to construct FQDN from pod hostname and cluster domain, FQDN ") {
		t.Errorf("a 65+ byte FQDN: %v", err)
	}
	got := string(hostsFileContent(pod, "10.88.0.5", podDomain(pod, "cluster.local"), ""))
	if !strings.Contains(got, "10.88.0.5\t"+pod.Spec.Hostname+".t.ns.svc.cluster.local\t"+pod.Spec.Hostname+"\n") {
		t.Errorf("hosts file lacks the FQDN line:\n%s", got)
	}
}

func TestSeccompAndAppArmorProfiles(t *testing.T) {
	pod := &corev1.Pod{}
	pod.Name = "p"
	c := &corev1.Container{Name: "app"}
	if sc := containerSecurityContext(pod, c, "/root/seccomp"); sc.Seccomp.ProfileType != runtimeapi.SecurityProfile_Unconfined || sc.Apparmor != nil {
		t.Errorf("nothing asked: seccomp %v apparmor %v", sc.Seccomp, sc.Apparmor)
	}
	local := "audit.json"
	pod.Spec.SecurityContext = &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
	if sc := containerSecurityContext(pod, c, "/root/seccomp"); sc.Seccomp.ProfileType != runtimeapi.SecurityProfile_RuntimeDefault {
		t.Errorf("pod RuntimeDefault: %v", sc.Seccomp)
	}
	c.SecurityContext = &corev1.SecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: &local}}
	if sc := containerSecurityContext(pod, c, "/root/seccomp"); sc.Seccomp.ProfileType != runtimeapi.SecurityProfile_Localhost || sc.Seccomp.LocalhostRef != "/root/seccomp/audit.json" {
		t.Errorf("container Localhost wins: %v", sc.Seccomp)
	}
	pod.Annotations = map[string]string{corev1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix + "app": "localhost/k8s-apparmor-example"}
	if sc := containerSecurityContext(pod, c, "/root/seccomp"); sc.Apparmor == nil || sc.Apparmor.ProfileType != runtimeapi.SecurityProfile_Localhost || sc.Apparmor.LocalhostRef != "k8s-apparmor-example" {
		t.Errorf("annotation localhost profile: %v", sc.Apparmor)
	}
	c.SecurityContext.AppArmorProfile = &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeRuntimeDefault}
	if sc := containerSecurityContext(pod, c, "/root/seccomp"); sc.Apparmor.ProfileType != runtimeapi.SecurityProfile_RuntimeDefault {
		t.Errorf("the container field wins over the annotation: %v", sc.Apparmor)
	}
}

func TestMaskedAndReadonlyPaths(t *testing.T) {
	pod := &corev1.Pod{}
	c := &corev1.Container{Name: "app"}
	sc := containerSecurityContext(pod, c, "")
	if !slices.Contains(sc.MaskedPaths, "/proc/kcore") || !slices.Contains(sc.ReadonlyPaths, "/proc/sys") {
		t.Errorf("default: masked %v readonly %v", sc.MaskedPaths, sc.ReadonlyPaths)
	}
	unmasked := corev1.UnmaskedProcMount
	c.SecurityContext = &corev1.SecurityContext{ProcMount: &unmasked}
	if sc := containerSecurityContext(pod, c, ""); len(sc.MaskedPaths) != 0 || len(sc.ReadonlyPaths) != 0 {
		t.Errorf("unmasked: masked %v readonly %v", sc.MaskedPaths, sc.ReadonlyPaths)
	}
}

func TestFSGroupIsASupplementalGroup(t *testing.T) {
	fsGroup := int64(1001)
	pod := &corev1.Pod{}
	pod.Spec.SecurityContext = &corev1.PodSecurityContext{SupplementalGroups: []int64{5}, FSGroup: &fsGroup}
	sc := containerSecurityContext(pod, &corev1.Container{Name: "app"}, "")
	if !slices.Equal(sc.SupplementalGroups, []int64{5, 1001}) {
		t.Errorf("container groups %v, want [5 1001]", sc.SupplementalGroups)
	}
	if !slices.Equal(pod.Spec.SecurityContext.SupplementalGroups, []int64{5}) {
		t.Errorf("the pod spec was changed: %v", pod.Spec.SecurityContext.SupplementalGroups)
	}
}

// 1.37's hostnameOverride is the pod's hostname, over hostname and
// subdomain (no domain then), in the sandbox and in /etc/hosts.
func TestHostnameOverride(t *testing.T) {
	pod := &corev1.Pod{}
	pod.Name, pod.Namespace = "web", "ns"
	pod.Spec.Hostname, pod.Spec.Subdomain = "named", "t"
	o := "db-0.backend.example"
	pod.Spec.HostnameOverride = &o
	if h, err := kernelHostname(pod, "cluster.local"); err != nil || h != o {
		t.Errorf("kernel hostname %q %v, want %q", h, err, o)
	}
	if d := podDomain(pod, "cluster.local"); d != "" {
		t.Errorf("domain %q with hostnameOverride, want none", d)
	}
	got := string(hostsFileContent(pod, "10.88.0.5", podDomain(pod, "cluster.local"), ""))
	if !strings.Contains(got, "10.88.0.5\t"+o+"\n") {
		t.Errorf("hosts file lacks the override:\n%s", got)
	}
}

// supplementalGroupsPolicy and SELinux labels reach the runtime: the
// pod's in the sandbox and containers, a container's label over the pod's.
func TestSupplementalGroupsPolicyAndSELinuxReachTheRuntime(t *testing.T) {
	b := New(Options{NodeName: "node"}, &fakeHost{dir: t.TempDir(), hosts: map[string]string{}}, nil)
	pod := testPod(corev1.RestartPolicyAlways, "a", "b")
	strict := corev1.SupplementalGroupsPolicyStrict
	pod.Spec.SecurityContext = &corev1.PodSecurityContext{SupplementalGroupsPolicy: &strict, SELinuxOptions: &corev1.SELinuxOptions{Type: "pod_t", Level: "s0:c1"}}
	pod.Spec.Containers[1].SecurityContext = &corev1.SecurityContext{SELinuxOptions: &corev1.SELinuxOptions{Type: "own_t"}}
	sb, err := b.Sandbox(NewPlan(pod, ""), 0)
	if err != nil {
		t.Fatal(err)
	}
	if sc := sb.Linux.SecurityContext; sc.SupplementalGroupsPolicy != runtimeapi.SupplementalGroupsPolicy_Strict || sc.SelinuxOptions.GetType() != "pod_t" || sc.SelinuxOptions.GetLevel() != "s0:c1" {
		t.Errorf("sandbox security context %+v", sc)
	}
	for i, want := range []string{"pod_t", "own_t"} {
		cfg, err := b.Container(context.Background(), NewPlan(pod, ""), &pod.Spec.Containers[i], "sha256:img", 0, "")
		if err != nil {
			t.Fatal(err)
		}
		if sc := cfg.Linux.SecurityContext; sc.SupplementalGroupsPolicy != runtimeapi.SupplementalGroupsPolicy_Strict || sc.SelinuxOptions.GetType() != want {
			t.Errorf("container %d security context: policy %v selinux %v, want Strict and %s", i, sc.SupplementalGroupsPolicy, sc.SelinuxOptions, want)
		}
	}
}

// recursiveReadOnly as the kubelet resolves it, and mountPropagation, reach
// the runtime's mounts.
func TestRecursiveReadOnlyAndPropagation(t *testing.T) {
	rro := func(mode corev1.RecursiveReadOnlyMode, readOnly bool, prop *corev1.MountPropagationMode) corev1.VolumeMount {
		return corev1.VolumeMount{Name: "v", ReadOnly: readOnly, RecursiveReadOnly: &mode, MountPropagation: prop}
	}
	for _, tc := range []struct {
		vm        corev1.VolumeMount
		supported bool
		want      bool
		err       string
	}{
		{rro(corev1.RecursiveReadOnlyEnabled, true, nil), true, true, ""},
		{rro(corev1.RecursiveReadOnlyEnabled, true, nil), false, false, "not supported by the runtime"},
		{rro(corev1.RecursiveReadOnlyIfPossible, true, nil), false, false, ""},
		{rro(corev1.RecursiveReadOnlyIfPossible, true, nil), true, true, ""},
		{rro(corev1.RecursiveReadOnlyEnabled, false, nil), true, false, "it is not read-only"},
		{rro(corev1.RecursiveReadOnlyEnabled, true, ptr.To(corev1.MountPropagationHostToContainer)), true, false, "not compatible with propagation"},
		{rro(corev1.RecursiveReadOnlyDisabled, true, nil), true, false, ""},
	} {
		got, err := recursiveReadOnly(tc.vm, tc.supported)
		if got != tc.want || (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%s readOnly %v supported %v: %v %v, want %v %q", *tc.vm.RecursiveReadOnly, tc.vm.ReadOnly, tc.supported, got, err, tc.want, tc.err)
		}
	}
	for mode, want := range map[corev1.MountPropagationMode]runtimeapi.MountPropagation{
		corev1.MountPropagationNone:            runtimeapi.MountPropagation_PROPAGATION_PRIVATE,
		corev1.MountPropagationHostToContainer: runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER,
		corev1.MountPropagationBidirectional:   runtimeapi.MountPropagation_PROPAGATION_BIDIRECTIONAL,
	} {
		if got := propagation(&mode); got != want {
			t.Errorf("%s: %v, want %v", mode, got, want)
		}
	}
}

// A pod's user namespace reaches the sandbox, every container and, as
// idmappings, every mount of the container; the node's namespace maps no
// mount.
func TestUserNamespaceReachesSandboxContainersAndMounts(t *testing.T) {
	b, _ := testBuilder(t, Options{})
	pod := testPod(corev1.RestartPolicyAlways, "a")
	pod.Spec.Volumes = []corev1.Volume{{Name: "cache", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	c := &pod.Spec.Containers[0]
	c.VolumeMounts = []corev1.VolumeMount{{Name: "cache", MountPath: "/cache"}}
	ids := []*runtimeapi.IDMapping{{HostId: 131072, ContainerId: 0, Length: 65536}}
	plan := NewPlan(pod, "")
	plan.UserNamespace = &runtimeapi.UserNamespace{Mode: runtimeapi.NamespaceMode_POD, Uids: ids, Gids: ids}
	sb, err := b.Sandbox(plan, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := sb.Linux.SecurityContext.NamespaceOptions.UsernsOptions; got != plan.UserNamespace {
		t.Errorf("sandbox userns %+v", got)
	}
	cfg, err := b.Container(context.Background(), plan, c, "img", 0, "10.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Linux.SecurityContext.NamespaceOptions.UsernsOptions; got != plan.UserNamespace {
		t.Errorf("container userns %+v", got)
	}
	if len(cfg.Mounts) < 2 {
		t.Fatalf("mounts %+v: want the volume and the managed files", cfg.Mounts)
	}
	for _, m := range cfg.Mounts {
		if len(m.UidMappings) != 1 || m.UidMappings[0].HostId != 131072 || len(m.GidMappings) != 1 {
			t.Errorf("mount %s: idmappings %v %v", m.ContainerPath, m.UidMappings, m.GidMappings)
		}
	}
	plan.UserNamespace = &runtimeapi.UserNamespace{Mode: runtimeapi.NamespaceMode_NODE}
	cfg, _ = b.Container(context.Background(), plan, c, "img", 0, "10.0.0.1")
	for _, m := range cfg.Mounts {
		if len(m.UidMappings) != 0 || len(m.GidMappings) != 0 {
			t.Errorf("host-user pod: mount %s is idmapped", m.ContainerPath)
		}
	}
}

func TestVolumeMountStatuses(t *testing.T) {
	enabled, ifPossible := corev1.RecursiveReadOnlyEnabled, corev1.RecursiveReadOnlyIfPossible
	c := &corev1.Container{VolumeMounts: []corev1.VolumeMount{
		{Name: "rw", MountPath: "/rw"},
		{Name: "ro", MountPath: "/ro", ReadOnly: true},
		{Name: "rro", MountPath: "/rro", ReadOnly: true, RecursiveReadOnly: &enabled},
		{Name: "maybe", MountPath: "/maybe", ReadOnly: true, RecursiveReadOnly: &ifPossible},
	}}
	mode := func(st corev1.VolumeMountStatus) string {
		if st.RecursiveReadOnly == nil {
			return "nil"
		}
		return string(*st.RecursiveReadOnly)
	}
	for rro, want := range map[bool]string{true: "nil Disabled Enabled Enabled", false: "nil Disabled Disabled Disabled"} {
		var got []string
		for i, st := range VolumeMountStatuses(c, rro) {
			if st.Name != c.VolumeMounts[i].Name || st.MountPath != c.VolumeMounts[i].MountPath || st.ReadOnly != c.VolumeMounts[i].ReadOnly {
				t.Errorf("status %+v of mount %+v", st, c.VolumeMounts[i])
			}
			got = append(got, mode(st))
		}
		if strings.Join(got, " ") != want {
			t.Errorf("runtime rro %v: recursiveReadOnly %q, want %q", rro, got, want)
		}
	}
}

// A container without limits of its own has the pod-level ones (the
// kubelet's getCPULimit/getMemoryLimit), and without a CPU request its
// shares come from that limit; its own limits win.
func TestContainerResourcesUnderPodLevelLimits(t *testing.T) {
	b, _ := testBuilder(t, Options{MemoryCapacity: 16 << 30, OOMRange: qos.OOMScoreRange{Min: -1000}, EnforceCPULimits: true, CPUPeriod: 100000})
	pod := testPod(corev1.RestartPolicyAlways, "bare", "own")
	pod.Spec.Resources = &corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("128Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3"), corev1.ResourceMemory: resource.MustParse("256Mi")},
	}
	own := &pod.Spec.Containers[1]
	own.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("64Mi")}
	own.Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}
	bare := b.Resources(pod, &pod.Spec.Containers[0])
	if bare.CpuQuota != 300000 || bare.CpuShares != 3072 || bare.MemoryLimitInBytes != 256<<20 {
		t.Errorf("a container without resources: quota %d, shares %d, memory %d; want the pod's 300000, 3072, 256Mi", bare.CpuQuota, bare.CpuShares, bare.MemoryLimitInBytes)
	}
	r := b.Resources(pod, own)
	if r.CpuQuota != 200000 || r.CpuShares != 1024 || r.MemoryLimitInBytes != 256<<20 {
		t.Errorf("a container with its own cpu limit: quota %d, shares %d, memory %d; want 200000, 1024, the pod's 256Mi", r.CpuQuota, r.CpuShares, r.MemoryLimitInBytes)
	}
}
