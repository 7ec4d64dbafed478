package config

import (
	"strings"
	"testing"
	"time"
)

// testdata/kubeadm-v<version>.yaml is what that kubeadm writes to
// /var/lib/kubelet/config.yaml ("kubeadm config print init-defaults
// --component-configs KubeletConfiguration", the KubeletConfiguration
// document as printed): zero values for most fields, meaning "the default".
func TestKubeadmConfigLoads(t *testing.T) {
	for _, version := range []string{"v1.34.2", "v1.37.2"} {
		t.Run(version, func(t *testing.T) { checkKubeadmConfig(t, "testdata/kubeadm-"+version+".yaml") })
	}
}

func checkKubeadmConfig(t *testing.T, file string) {
	cfg, err := Load(file)
	if err != nil {
		t.Fatalf("kubeadm's config must load: %v", err)
	}
	d := Defaults()
	for field, got := range map[string][2]any{
		"containerRuntimeEndpoint":                   {cfg.ContainerRuntimeEndpoint, d.ContainerRuntimeEndpoint},
		"runtimeRequestTimeout":                      {cfg.RuntimeRequestTimeout.Duration, 2 * time.Minute},
		"fileCheckFrequency":                         {cfg.FileCheckFrequency.Duration, 20 * time.Second},
		"syncFrequency":                              {cfg.SyncFrequency.Duration, time.Minute},
		"nodeStatusUpdateFrequency":                  {cfg.NodeStatusUpdateFrequency.Duration, 10 * time.Second},
		"nodeStatusReportFrequency":                  {cfg.NodeStatusReportFrequency.Duration, 5 * time.Minute},
		"evictionPressureTransitionPeriod":           {cfg.EvictionPressureTransitionPeriod.Duration, 5 * time.Minute},
		"imageMinimumGCAge":                          {cfg.ImageMinimumGCAge.Duration, 2 * time.Minute},
		"authentication.webhook.cacheTTL":            {cfg.Authentication.Webhook.CacheTTL.Duration, 2 * time.Minute},
		"authorization.webhook.cacheAuthorizedTTL":   {cfg.Authorization.Webhook.CacheAuthorizedTTL.Duration, 5 * time.Minute},
		"authorization.webhook.cacheUnauthorizedTTL": {cfg.Authorization.Webhook.CacheUnauthorizedTTL.Duration, 30 * time.Second},
		"authentication.x509.clientCAFile":           {cfg.Authentication.X509.ClientCAFile, "/etc/kubernetes/pki/ca.crt"},
		"cgroupDriver":                               {cfg.CgroupDriver, "systemd"},
		"staticPodPath":                              {cfg.StaticPodPath, "/etc/kubernetes/manifests"},
		"clusterDNS":                                 {strings.Join(cfg.ClusterDNS, ","), "10.96.0.10"},
		"healthzPort":                                {*cfg.HealthzPort, int32(10248)},
		"maxPods":                                    {cfg.MaxPods, int32(110)},
		"port":                                       {cfg.Port, int32(10250)},
		"evictionHard":                               {cfg.EvictionHard["memory.available"], "100Mi"},
		"readOnlyPort":                               {cfg.ReadOnlyPort, d.ReadOnlyPort},
		"rotateCertificates":                         {cfg.RotateCertificates, true},
		// Unset, so the kubelet's 1.35+ default: a cgroup v1 host is refused.
		"failCgroupV1": {cfg.FailOnCgroupV1(), true},
	} {
		if got[0] != got[1] {
			t.Errorf("%s = %v, want %v", field, got[0], got[1])
		}
	}
	// kubeadm spells out fields nodeagent does not implement, all at their
	// zero values: nothing to warn about.
	if len(cfg.Warnings) > 0 {
		t.Errorf("kubeadm's config warns: %q", cfg.Warnings)
	}
}

func TestZeroValuesTakeTheKubeletsDefaults(t *testing.T) {
	cfg, err := Load(write(t, header+"syncFrequency: 0s\nmaxPods: 0\ncontainerRuntimeEndpoint: \"\"\nport: 0\neventBurst: 0\ncrashLoopBackOff: {}\n"))
	if err != nil {
		t.Fatal(err)
	}
	d := Defaults()
	if cfg.SyncFrequency != d.SyncFrequency || cfg.MaxPods != 110 || cfg.ContainerRuntimeEndpoint != d.ContainerRuntimeEndpoint || cfg.Port != 10250 || cfg.EventBurst != 100 {
		t.Errorf("zero values were not defaulted: %+v", cfg.KubeletConfiguration)
	}
	// An empty map or list is a value, as in the kubelet; readOnlyPort: 0
	// turns the read-only API off although nodeagent's default is 10255.
	cfg, err = Load(write(t, header+"evictionHard: {}\nreadOnlyPort: 0\n"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.EvictionHard == nil || len(cfg.EvictionHard) != 0 || cfg.ReadOnlyPort != 0 {
		t.Errorf("evictionHard = %v, readOnlyPort = %d; want {} and 0", cfg.EvictionHard, cfg.ReadOnlyPort)
	}
}

// Defaults used to share one *bool between four fields, so a file's
// cgroupsPerQOS: false also turned off CPU limits, node registration and
// serial image pulls.
func TestAFieldDoesNotChangeAnother(t *testing.T) {
	cfg, err := Load(write(t, header+"cgroupsPerQOS: false\n"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.PerQOS() || !*cfg.CPUCFSQuota || !*cfg.RegisterNode || !*cfg.SerializeImagePulls {
		t.Errorf("cgroupsPerQOS: false changed other fields: cpuCFSQuota %v registerNode %v serializeImagePulls %v",
			*cfg.CPUCFSQuota, *cfg.RegisterNode, *cfg.SerializeImagePulls)
	}
	*cfg.CPUCFSQuota = false
	if !*Defaults().CPUCFSQuota || !*cfg.RegisterNode {
		t.Error("writing through one default pointer changed another")
	}
}

func TestUnhonouredFieldsWarnOnlyWhenTheyAskForSomething(t *testing.T) {
	cfg, err := Load(write(t, header+"cpuManagerPolicy: none\nhttpCheckFrequency: 20s\nstreamingConnectionIdleTimeout: 4h0m0s\nfailSwapOn: true\n"+
		"shutdownGracePeriod: 0s\nmemorySwap: {}\nlogging:\n  verbosity: 0\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Warnings) > 0 {
		t.Errorf("zero and kubelet-default values warn: %q", cfg.Warnings)
	}
	cfg, err = Load(write(t, header+"hairpinMode: hairpin-veth\nmaxOpenFiles: 1000\n"))
	if err != nil {
		t.Fatal(err)
	}
	joined := strings.Join(cfg.Warnings, "\n")
	if len(cfg.Warnings) != 2 || !strings.Contains(joined, `hairpinMode: "hairpin-veth" is not honoured`) || !strings.Contains(joined, `maxOpenFiles: "1000" is not honoured`) {
		t.Errorf("warnings = %q", cfg.Warnings)
	}
}

// enforceNodeAllocatable entries other than pods are accepted, as the
// kubelet accepts them, and the warning says what nodeagent does instead.
func TestReservedEnforcementSaysWhatIsDone(t *testing.T) {
	cfg, err := Load(write(t, header+"enforceNodeAllocatable: [pods, system-reserved, kube-reserved-compressible]\n"))
	if err != nil {
		t.Fatal(err)
	}
	joined := strings.Join(cfg.Warnings, "\n")
	if len(cfg.Warnings) != 2 || !strings.Contains(joined, "system-reserved is not enforced: nodeagent sets no limits on the systemReservedCgroup") ||
		!strings.Contains(joined, "kube-reserved-compressible is not enforced: nodeagent sets no limits on the kubeReservedCgroup") {
		t.Errorf("warnings = %q", cfg.Warnings)
	}
	if !cfg.EnforcePods() {
		t.Error("pods is no longer enforced")
	}
}
