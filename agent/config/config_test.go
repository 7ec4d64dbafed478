package config

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func write(t *testing.T, body string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(f, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

const header = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"

func TestDefaultsAreValid(t *testing.T) {
	cfg, err := Load("")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ReadOnlyPort != 10255 || cfg.Address != "127.0.0.1" || cfg.MaxPods != 110 || !cfg.PerQOS() || cfg.PodPids() != -1 {
		t.Errorf("unexpected defaults: %+v", cfg.KubeletConfiguration)
	}
	if err := cfg.Validate(); err != nil {
		t.Error(err)
	}
}

// The sample the README points at must stay loadable without warnings.
func TestSampleConfigIsValid(t *testing.T) {
	data, err := os.ReadFile("../../examples/nodeagent.yaml")
	if err != nil {
		t.Fatal(err)
	}
	body := strings.NewReplacer("@CRI_ENDPOINT@", "unix:///run/x.sock", "@MANIFESTS@", "/tmp/manifests").Replace(string(data))
	cfg, err := Load(write(t, body))
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Warnings) > 0 {
		t.Errorf("sample has warnings: %v", cfg.Warnings)
	}
	if cfg.PodPids() != 4096 || cfg.SystemReserved["memory"] != "256Mi" {
		t.Errorf("sample values not loaded: %+v", cfg.KubeletConfiguration)
	}
}

func TestFileOverridesDefaults(t *testing.T) {
	cfg, err := Load(write(t, header+"maxPods: 7\ncgroupRoot: /custom\nfileCheckFrequency: 5s\nreadOnlyPort: 0\n"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MaxPods != 7 || cfg.CgroupRoot != "/custom" || cfg.FileCheckFrequency.Duration != 5*time.Second || cfg.ReadOnlyPort != 0 {
		t.Errorf("overrides not applied: %+v", cfg.KubeletConfiguration)
	}
	if cfg.StaticPodPath != "/etc/nodeagent/manifests" || cfg.EvictionHard["memory.available"] != "100Mi" {
		t.Error("unset fields must keep their defaults")
	}
}

func TestWarnings(t *testing.T) {
	cfg, err := Load(write(t, header+"maxPods: 10\nstaticPodURL: http://x\nnotAField: 1\n"))
	if err != nil {
		t.Fatal(err)
	}
	joined := strings.Join(cfg.Warnings, "\n")
	if !strings.Contains(joined, `staticPodURL: "http://x" is not honoured`) || !strings.Contains(joined, `unknown field "notAField"`) || len(cfg.Warnings) != 2 {
		t.Errorf("warnings = %q", cfg.Warnings)
	}
}

func TestErrorsNameFieldAndValue(t *testing.T) {
	cases := []struct{ body, want string }{
		{"maxPods: -1\n", `maxPods: invalid value "-1"`},
		{"cgroupDriver: weird\n", `cgroupDriver: invalid value "weird"`},
		{"cgroupRoot: rel/path\n", `cgroupRoot: invalid value "rel/path"`},
		{"cgroupRoot: /has_underscore\n", `cgroupRoot: invalid value "/has_underscore"`},
		{"podCIDR: 10.0.0.0/40\n", `podCIDR: invalid value "10.0.0.0/40"`},
		{"address: nowhere\n", `address: invalid value "nowhere"`},
		{"readOnlyPort: 70000\n", `readOnlyPort: invalid value "70000"`},
		{"podPidsLimit: 0\n", `podPidsLimit: invalid value "0"`},
		{"staticPodPath: manifests\n", `staticPodPath: invalid value "manifests"`},
		{"containerRuntimeEndpoint: /run/containerd.sock\n", `containerRuntimeEndpoint: invalid value "/run/containerd.sock"`},
		{"systemReserved:\n  memory: lots\n", `systemReserved.memory: invalid value "lots"`},
		{"kubeReserved:\n  gpu: \"1\"\n", `kubeReserved.gpu: invalid value "1": unknown resource`},
		{"kubeReserved:\n  memory: 1e19\n", `kubeReserved.memory: invalid value "1e+19": must be at most 9223372036854775807m`},
		{"containerLogMaxSize: 1e19\n", `containerLogMaxSize: invalid value "1e+19"`},
		{"systemReserved:\n  memory: \"1e-100000000\"\n", `systemReserved.memory: invalid value "1e-100000000"`},
		{"evictionHard:\n  memory.available: \"1e100000000\"\n", `evictionHard.memory.available: invalid value "1e100000000": must be a quantity`},
		{"enforceNodeAllocatable: [pods, everything]\n", `enforceNodeAllocatable: invalid value "everything"`},
		{"evictionHard:\n  memory.available: 200%\n", `evictionHard.memory.available: invalid value "200%"`},
		{"evictionHard:\n  memory.free: 1Gi\n", `evictionHard.memory.free: invalid value "1Gi": unknown eviction signal`},
		{"evictionHard:\n  memory.available: NaN%\n", `evictionHard.memory.available: invalid value "NaN%": percentage must be between 0% and 100%`},
		{"cpuCFSQuotaPeriod: 5s\n", `cpuCFSQuotaPeriod: invalid value "5s"`},
		{"crashLoopBackOff:\n  maxContainerRestartPeriod: 500ms\n", `crashLoopBackOff.maxContainerRestartPeriod: invalid value "500ms"`},
		{"imageGCHighThresholdPercent: 101\n", `imageGCHighThresholdPercent: invalid value "101"`},
		{"imageGCHighThresholdPercent: 50\nimageGCLowThresholdPercent: 60\n", `imageGCLowThresholdPercent: invalid value "60": must be between 0 and 100 and below imageGCHighThresholdPercent (50)`},
		{"imageMaximumGCAge: 1m\nimageMinimumGCAge: 2m\n", `imageMaximumGCAge: invalid value "1m0s": must be greater than imageMinimumGCAge (2m0s)`},
		{"imageMaximumGCAge: -1m\n", `imageMaximumGCAge: invalid value "-1m0s": must be >= 0`},
		{"shutdownGracePeriod: 10s\nshutdownGracePeriodCriticalPods: 20s\n", `shutdownGracePeriodCriticalPods: invalid value "20s": must be <= shutdownGracePeriod (10s)`},
		{"shutdownGracePeriod: 500ms\n", `shutdownGracePeriod: invalid value "500ms": must be either zero or otherwise >= 1 sec`},
		{"shutdownGracePeriod: 10s\nshutdownGracePeriodByPodPriority: [{priority: 0, shutdownGracePeriodSeconds: 10}]\n", `shutdownGracePeriodByPodPriority: invalid value "1": cannot be given with shutdownGracePeriod`},
		{"containerLogMaxSize: huge\n", `containerLogMaxSize: invalid value "huge"`},
		{"containerLogMaxFiles: 1\n", `containerLogMaxFiles: invalid value "1": must be >= 2`},
		{"containerLogMonitorInterval: 0s\n", `containerLogMonitorInterval: invalid value "0s"`},
		{"maxPods: many\n", `maxPods`},
		{"qosReserved:\n  memory: 150%\n", `qosReserved.memory: invalid value "150%": want a percentage from 0% to 100%`},
		{"qosReserved:\n  memory: 1Gi\n", `qosReserved.memory: invalid value "1Gi"`},
		{"qosReserved:\n  cpu: 50%\n", `qosReserved: invalid value "cpu": only memory can be reserved`},
	}
	for _, tc := range cases {
		t.Run(tc.want, func(t *testing.T) {
			f := write(t, header+tc.body)
			_, err := Load(f)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), f) {
				t.Errorf("want error containing %q and the file name, got %v", tc.want, err)
			}
		})
	}
	t.Run("several bad fields are all reported", func(t *testing.T) {
		_, err := Load(write(t, header+"maxPods: -1\naddress: x\n"))
		if err == nil || !strings.Contains(err.Error(), "maxPods") || !strings.Contains(err.Error(), "address") {
			t.Errorf("got %v", err)
		}
	})
}

func TestHeaderChecks(t *testing.T) {
	for body, want := range map[string]string{
		"maxPods: 1\n": `apiVersion ""`,
		"apiVersion: kubelet.config.k8s.io/v1beta1\nkind: Pod\n": `kind "Pod"`,
		"":   "empty",
		"{{": "not valid YAML",
	} {
		if _, err := Load(write(t, body)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: want error containing %q, got %v", body, want, err)
		}
	}
	if _, err := Load("/nonexistent/config.yaml"); err == nil || !strings.Contains(err.Error(), "/nonexistent/config.yaml") {
		t.Errorf("missing file: %v", err)
	}
}

// --print-default-config's output is a config file that loads back to the
// defaults, with no field nodeagent would ignore.
func TestDefaultYAMLLoadsBackToTheDefaults(t *testing.T) {
	data, err := DefaultYAML()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(write(t, string(data)))
	if err != nil {
		t.Fatalf("%v\n%s", err, data)
	}
	if len(cfg.Warnings) > 0 {
		t.Errorf("warnings: %v", cfg.Warnings)
	}
	want := Defaults()
	if !reflect.DeepEqual(cfg.KubeletConfiguration, want.KubeletConfiguration) {
		t.Errorf("loaded back:\n%+v\nwant\n%+v", cfg.KubeletConfiguration, want.KubeletConfiguration)
	}
}

func TestReloadTakesOnlyTheReloadableFields(t *testing.T) {
	a, b := Defaults(), Defaults()
	files, gcHigh := int32(9), int32(90)
	b.ContainerLogMaxFiles, b.ImageGCHighThresholdPercent = &files, &gcHigh
	b.CgroupRoot = "/elsewhere"
	b.StaticPodURL = "http://elsewhere" // not honoured: not reported
	eff, reload, restart, err := Reload(&a, &b)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(reload, []string{"containerLogMaxFiles", "imageGCHighThresholdPercent"}) || !slices.Equal(restart, []string{"cgroupRoot"}) {
		t.Errorf("reloadable %v, restart %v", reload, restart)
	}
	if *eff.ContainerLogMaxFiles != 9 || *eff.ImageGCHighThresholdPercent != 90 || eff.CgroupRoot != a.CgroupRoot || eff.StaticPodURL != "" {
		t.Errorf("effective: maxFiles %d, gcHigh %d, cgroupRoot %q, staticPodURL %q; want the two reloaded fields and the rest as running",
			*eff.ContainerLogMaxFiles, *eff.ImageGCHighThresholdPercent, eff.CgroupRoot, eff.StaticPodURL)
	}
	if *a.ContainerLogMaxFiles == 9 {
		t.Error("Reload changed the running configuration in place")
	}
	if _, reload, restart, _ := Reload(&a, &a); len(reload)+len(restart) != 0 {
		t.Errorf("no change reported %v %v", reload, restart)
	}
}

// /configz served every field of the file, including ones nodeagent
// ignores and that can carry a token (staticPodURLHeader).
func TestHonouredFieldsLeaveOutWhatIsIgnored(t *testing.T) {
	f := write(t, header+"maxPods: 7\nstaticPodURL: https://example.invalid/pods\nstaticPodURLHeader:\n  Authorization: [\"Bearer s3cret\"]\n")
	cfg, err := Load(f)
	if err != nil {
		t.Fatal(err)
	}
	fields, err := cfg.HonouredFields()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(fields)
	if strings.Contains(string(b), "s3cret") || strings.Contains(string(b), "staticPodURL") {
		t.Errorf("an ignored field is served: %s", b)
	}
	if fmt.Sprint(fields["maxPods"]) != "7" {
		t.Errorf("maxPods = %v", fields["maxPods"])
	}
	for k := range fields {
		if k != "apiVersion" && k != "kind" && !slices.Contains(Honoured, k) {
			t.Errorf("field %s is served but not honoured", k)
		}
	}
}

func TestServerFields(t *testing.T) {
	cfg := Defaults()
	if cfg.Port != 10250 || cfg.AnonymousAuthentication() || !cfg.WebhookAuthentication() || cfg.Authorization.Mode != "Webhook" ||
		cfg.Authorization.Webhook.CacheAuthorizedTTL.Duration != 5*time.Minute || cfg.TLSMinVersion() != tls.VersionTLS12 {
		t.Errorf("server defaults are not the kubelet's: %+v %+v", cfg.Authentication, cfg.Authorization)
	}
	// A file that sets one nested field keeps the defaults of the others.
	got, err := Load(write(t, header+"authentication:\n  anonymous:\n    enabled: true\ntlsCipherSuites: [TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !got.AnonymousAuthentication() || !got.WebhookAuthentication() || got.Authentication.Webhook.CacheTTL.Duration != 2*time.Minute {
		t.Errorf("nested defaults lost: %+v", got.Authentication)
	}
	if ids, _ := got.TLSCipherSuites(); len(ids) != 1 || ids[0] != tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256 {
		t.Errorf("cipher suites: %v", ids)
	}
	for body, want := range map[string]string{
		"port: -1\n":                                       "port: invalid value \"-1\"",
		"port: 10255\n":                                    "must differ from readOnlyPort",
		"tlsMinVersion: TLS1.2\n":                          "tlsMinVersion: invalid value \"TLS1.2\": want one of VersionTLS10",
		"tlsCipherSuites: [RC5]\n":                         "tlsCipherSuites: invalid value \"RC5\"",
		"tlsCertFile: /x.crt\n":                            "tlsCertFile and tlsPrivateKeyFile are set together",
		"authorization:\n  mode: RBAC\n":                   "authorization.mode: invalid value \"RBAC\": want AlwaysAllow or Webhook",
		"authentication:\n  webhook:\n    cacheTTL: -1s\n": "authentication.webhook.cacheTTL: invalid value \"-1s\"",
	} {
		_, err := Load(write(t, header+body))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: got %v, want an error with %q", body, err, want)
		}
	}
}

func TestQOSReservedNeedsItsFeatureGate(t *testing.T) {
	cfg, err := Load(write(t, header+"qosReserved:\n  memory: 50%\nfeatureGates:\n  SomeOtherGate: true\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := cfg.QOSReservedMemory(); ok {
		t.Error("qosReserved applies without the QOSReserved gate; the kubelet needs the gate")
	}
	joined := strings.Join(cfg.Warnings, "\n")
	if !strings.Contains(joined, "qosReserved is not applied") || !strings.Contains(joined, "featureGates.SomeOtherGate") {
		t.Errorf("warnings %q: want the ungated qosReserved and the ignored gate named", cfg.Warnings)
	}
	cfg, err = Load(write(t, header+"qosReserved:\n  memory: 50%\nfeatureGates:\n  QOSReserved: true\n"))
	if err != nil {
		t.Fatal(err)
	}
	if pct, ok := cfg.QOSReservedMemory(); !ok || pct != 50 || len(cfg.Warnings) != 0 {
		t.Errorf("with the gate: %d%% applied %v, warnings %q; want 50%% applied, no warning", pct, ok, cfg.Warnings)
	}
}

func TestMemoryQoSGateAndThrottlingFactor(t *testing.T) {
	cfg, err := Load(write(t, header+"featureGates:\n  MemoryQoS: true\nmemoryThrottlingFactor: 0.8\nmemoryReservationPolicy: TieredReservation\n"))
	if err != nil {
		t.Fatal(err)
	}
	if f := cfg.ThrottlingFactor(); !cfg.MemoryQoS() || f == nil || *f != 0.8 || !cfg.TieredMemory() || len(cfg.Warnings) != 0 {
		t.Errorf("MemoryQoS %v factor %v tiered %v warnings %q; want the gate on, 0.8, TieredReservation, no warning", cfg.MemoryQoS(), f, cfg.TieredMemory(), cfg.Warnings)
	}
	// 1.37's defaults: the gate on (beta), no factor (no memory.high),
	// policy None (no memory.min or memory.low).
	cfg, err = Load(write(t, header))
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.MemoryQoS() || cfg.ThrottlingFactor() != nil || cfg.TieredMemory() || cfg.MemoryReservationPolicy != "None" {
		t.Errorf("defaults: MemoryQoS %v factor %v policy %q, want on, nil and None", cfg.MemoryQoS(), cfg.ThrottlingFactor(), cfg.MemoryReservationPolicy)
	}
	for _, tc := range []struct{ file, field, value string }{
		{"memoryThrottlingFactor: 0\n", "memoryThrottlingFactor", "0"},
		{"memoryThrottlingFactor: -0.5\n", "memoryThrottlingFactor", "-0.5"},
		{"memoryThrottlingFactor: 1.1\n", "memoryThrottlingFactor", "1.1"},
		{"featureGates:\n  MemoryQoS: false\nmemoryThrottlingFactor: 0.7\n", "memoryThrottlingFactor", "0.7"},
		{"memoryReservationPolicy: Strict\n", "memoryReservationPolicy", "Strict"},
		{"featureGates:\n  MemoryQoS: false\nmemoryReservationPolicy: TieredReservation\n", "memoryReservationPolicy", "TieredReservation"},
		{"tlsCurvePreferences: [29, 7]\n", "tlsCurvePreferences[1]", "7"},
	} {
		_, err := Load(write(t, header+tc.file))
		if err == nil || !strings.Contains(err.Error(), tc.field) || !strings.Contains(err.Error(), tc.value) {
			t.Errorf("%q: %v, want an error naming %s and %s", tc.file, err, tc.field, tc.value)
		}
	}
	// 0.9 was 1.34's default: the kubelet still takes it without the gate.
	if _, err := Load(write(t, header+"featureGates:\n  MemoryQoS: false\nmemoryThrottlingFactor: 0.9\n")); err != nil {
		t.Errorf("1.34's default factor without the gate: %v", err)
	}
}

// failCgroupV1 defaults to true, as in the kubelet since 1.35; the curves
// reach the TLS config; the pull-credential policy's warning says what
// nodeagent does instead of claiming the kubelet's default.
func TestKubelet137Fields(t *testing.T) {
	cfg, err := Load(write(t, header+"tlsCurvePreferences: [29, 4588]\nimagePullCredentialsVerificationPolicy: AlwaysVerify\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.FailOnCgroupV1() {
		t.Error("failCgroupV1 unset: want true, the kubelet's default")
	}
	if c := cfg.TLSCurves(); len(c) != 2 || c[0] != tls.X25519 || c[1] != tls.X25519MLKEM768 {
		t.Errorf("curves %v, want X25519 and X25519MLKEM768", c)
	}
	if len(cfg.Warnings) > 0 || cfg.ImagePullCredentialsVerificationPolicy != "AlwaysVerify" {
		t.Errorf("the pull-credential policy is honoured: warnings %q, policy %q", cfg.Warnings, cfg.ImagePullCredentialsVerificationPolicy)
	}
	if d := Defaults().ImagePullCredentialsVerificationPolicy; d != "NeverVerifyPreloadedImages" {
		t.Errorf("default pull-credential policy %q, want 1.37's NeverVerifyPreloadedImages", d)
	}
	for file, want := range map[string]string{
		"imagePullCredentialsVerificationPolicy: Sometimes\n":                                                                       `imagePullCredentialsVerificationPolicy: invalid value "Sometimes"`,
		"preloadedImagesVerificationAllowlist: [a/b]\n":                                                                             `can't be set if imagePullCredentialsVerificationPolicy is not "NeverVerifyAllowlistedImages"`,
		"imagePullCredentialsVerificationPolicy: NeverVerifyAllowlistedImages\npreloadedImagesVerificationAllowlist: [\"a/b:1\"]\n": `preloadedImagesVerificationAllowlist[0]: invalid value "a/b:1": neither tag nor digest`,
		"imagePullCredentialsVerificationPolicy: NeverVerifyAllowlistedImages\npreloadedImagesVerificationAllowlist: [\"a/*/b\"]\n": `only patterns ending with '/*' are allowed`,
		"imagePullCredentialsVerificationPolicy: NeverVerifyAllowlistedImages\npreloadedImagesVerificationAllowlist: [\"/*\"]\n":    `at least registry hostname is required`,
	} {
		if _, err := Load(write(t, header+file)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", file, err, want)
		}
	}
	if _, err := Load(write(t, header+"imagePullCredentialsVerificationPolicy: NeverVerifyAllowlistedImages\npreloadedImagesVerificationAllowlist: [registry.example/team/*, registry.example/base/os]\n")); err != nil {
		t.Errorf("a valid allowlist: %v", err)
	}
	cfg, err = Load(write(t, header+"failCgroupV1: false\n"))
	if err != nil || cfg.FailOnCgroupV1() {
		t.Errorf("failCgroupV1: false: %v, FailOnCgroupV1 %v", err, err == nil && cfg.FailOnCgroupV1())
	}
}
