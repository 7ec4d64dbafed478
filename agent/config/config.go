package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"nodeagent/internal/safefile"
	"nodeagent/network"
)

const (
	APIVersion = "kubelet.config.k8s.io/v1beta1"
	Kind       = "KubeletConfiguration"
)

// Honoured are the KubeletConfiguration fields nodeagent implements.
var Honoured = []string{
	"address", "allowedUnsafeSysctls", "authentication", "authorization", "cgroupDriver", "cgroupRoot", "cgroupsPerQOS", "clusterDNS", "clusterDomain",
	"containerLogMaxFiles", "containerLogMaxSize", "containerLogMonitorInterval", "containerRuntimeEndpoint", "cpuCFSQuota",
	"crashLoopBackOff", "healthzBindAddress", "healthzPort", "singleProcessOOMKill", "enableProfilingHandler", "imageGCHighThresholdPercent", "imageGCLowThresholdPercent", "imageMinimumGCAge", "imageMaximumGCAge", "cpuCFSQuotaPeriod",
	"shutdownGracePeriod", "shutdownGracePeriodCriticalPods", "shutdownGracePeriodByPodPriority", "enforceNodeAllocatable",
	"eventRecordQPS", "eventBurst", "evictionHard", "evictionSoft", "featureGates", "evictionSoftGracePeriod", "evictionMaxPodGracePeriod", "evictionMinimumReclaim",
	"evictionPressureTransitionPeriod", "fileCheckFrequency", "kubeReserved", "maxPods", "memoryThrottlingFactor", "memoryReservationPolicy", "failCgroupV1", "podCIDR", "podLogsDir",
	"podPidsLimit", "port", "protectKernelDefaults", "qosReserved", "readOnlyPort", "resolvConf", "rotateCertificates", "serverTLSBootstrap", "runtimeRequestTimeout", "staticPodPath",
	"syncFrequency", "systemReserved", "tlsCertFile", "tlsCipherSuites", "tlsCurvePreferences", "tlsMinVersion", "tlsPrivateKeyFile", "userNamespaces", "volumeStatsAggPeriod",
	"imagePullCredentialsVerificationPolicy", "preloadedImagesVerificationAllowlist",
	// API-server mode (--kubeconfig).
	"kubeAPIBurst", "kubeAPIQPS", "nodeLeaseDurationSeconds", "nodeStatusMaxImages",
	"nodeStatusReportFrequency", "nodeStatusUpdateFrequency", "registerNode", "registerWithTaints",
	"serializeImagePulls",
	// The CPU manager (none, static); the memory and topology managers'
	// fields are checked and refused unless off.
	"cpuManagerPolicy", "cpuManagerPolicyOptions", "reservedSystemCPUs",
	"memoryManagerPolicy", "topologyManagerPolicy", "topologyManagerPolicyOptions", "reservedMemory",
	"memorySwap", "failSwapOn",
}

// Config is a loaded, defaulted and validated configuration.
type Config struct {
	kubeletv1beta1.KubeletConfiguration

	// File is where it was loaded from ("" for defaults only).
	File string
	// Warnings lists fields that were ignored, for the start-up log.
	Warnings []string
}

// Defaults returns the configuration used when a field is unset. Where the
// kubelet has a default, it is the kubelet's, except where the README says
// otherwise: the read-only API is on 127.0.0.1:10255 (the kubelet's is off),
// and the static pod path and pod CIDR have nodeagent defaults (the kubelet
// has none).
func Defaults() Config {
	// Every pointer is its own: a caller that writes through one must not
	// change another field.
	yes := func() *bool { return ptr.To(true) }
	c := Config{KubeletConfiguration: kubeletv1beta1.KubeletConfiguration{
		TypeMeta:                               metav1.TypeMeta{APIVersion: APIVersion, Kind: Kind},
		StaticPodPath:                          "/etc/nodeagent/manifests",
		ContainerRuntimeEndpoint:               "unix:///run/containerd/containerd.sock",
		CgroupRoot:                             "/",
		CgroupsPerQOS:                          yes(),
		CgroupDriver:                           "cgroupfs",
		EnforceNodeAllocatable:                 []string{"pods"},
		PodPidsLimit:                           ptr.To(int64(-1)),
		MaxPods:                                110,
		PodCIDR:                                network.DefaultPodCIDR,
		ReadOnlyPort:                           10255,
		HealthzPort:                            ptr.To(int32(10248)),
		HealthzBindAddress:                     "127.0.0.1",
		Address:                                "127.0.0.1",
		CPUCFSQuota:                            yes(),
		CPUCFSQuotaPeriod:                      &metav1.Duration{Duration: 100 * time.Millisecond},
		RuntimeRequestTimeout:                  metav1.Duration{Duration: 2 * time.Minute},
		FileCheckFrequency:                     metav1.Duration{Duration: 20 * time.Second},
		SyncFrequency:                          metav1.Duration{Duration: time.Minute},
		ResolverConfig:                         ptr.To("/etc/resolv.conf"),
		PodLogsDir:                             "/var/log/pods",
		ContainerLogMaxSize:                    "10Mi",
		ContainerLogMaxFiles:                   ptr.To(int32(5)),
		ContainerLogMonitorInterval:            &metav1.Duration{Duration: 10 * time.Second},
		ImageGCHighThresholdPercent:            ptr.To(int32(85)),
		ImageGCLowThresholdPercent:             ptr.To(int32(80)),
		ImageMinimumGCAge:                      metav1.Duration{Duration: 2 * time.Minute},
		VolumeStatsAggPeriod:                   metav1.Duration{Duration: time.Minute},
		EvictionPressureTransitionPeriod:       metav1.Duration{Duration: 5 * time.Minute},
		RegisterNode:                           yes(),
		NodeStatusUpdateFrequency:              metav1.Duration{Duration: 10 * time.Second},
		NodeStatusReportFrequency:              metav1.Duration{Duration: 5 * time.Minute},
		NodeLeaseDurationSeconds:               40,
		NodeStatusMaxImages:                    ptr.To(int32(50)),
		SerializeImagePulls:                    yes(),
		MemoryReservationPolicy:                kubeletv1beta1.NoneMemoryReservationPolicy,
		FailCgroupV1:                           yes(),
		ImagePullCredentialsVerificationPolicy: kubeletv1beta1.NeverVerifyPreloadedImages,
		KubeAPIQPS:                             ptr.To(int32(50)),
		KubeAPIBurst:                           100,
		EventRecordQPS:                         ptr.To(int32(50)),
		EventBurst:                             100,
		EvictionHard: map[string]string{
			"memory.available":  "100Mi",
			"nodefs.available":  "10%",
			"nodefs.inodesFree": "5%",
			"imagefs.available": "15%",
		},
	}}
	serverDefaults(&c.KubeletConfiguration)
	return c
}

// DefaultYAML is the defaults as a config file: the fields nodeagent
// honours, with the values it uses when a file leaves them out.
func DefaultYAML() ([]byte, error) {
	defaults := Defaults()
	out, err := defaults.HonouredFields()
	if err != nil {
		return nil, err
	}
	return yaml.Marshal(out)
}

// HonouredFields is the configuration as the fields nodeagent honours
// (with apiVersion and kind): what /configz serves. A field it ignores is
// left out, whatever the file said (staticPodURLHeader, say, can carry a
// token).
func (c *Config) HonouredFields() (map[string]any, error) {
	all, err := c.fields()
	if err != nil {
		return nil, err
	}
	out := map[string]any{}
	for _, f := range append([]string{"apiVersion", "kind"}, Honoured...) {
		if v, ok := all[f]; ok {
			out[f] = v
		}
	}
	return out, nil
}

// MaxConfigSize bounds the config file read: a KubeletConfiguration is a
// few KiB.
const MaxConfigSize = 1 << 20

// Load reads file (YAML or JSON), applies defaults to unset fields and
// validates. An empty file name returns the defaults.
func Load(file string) (*Config, error) {
	cfg := Defaults()
	if file == "" {
		return &cfg, nil
	}
	data, err := safefile.Read(file, MaxConfigSize)
	if err != nil {
		return nil, fmt.Errorf("read config %s: %w", file, err)
	}
	if err := cfg.decode(data); err != nil {
		return nil, fmt.Errorf("config %s: %w", file, err)
	}
	cfg.File = file
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("config %s: %w", file, err)
	}
	return &cfg, nil
}

// decode reads the file's fields and defaults the rest with the kubelet's
// rule: a field left out or set to its zero value ("0s", "", 0, {}) takes
// the default, at every depth. kubeadm writes its configs that way.
// readOnlyPort is the one exception: nodeagent's default is 10255, so an
// explicit 0 must still turn it off.
func (c *Config) decode(data []byte) error {
	var raw map[string]any
	if err := yaml.Unmarshal(data, &raw); err != nil {
		return fmt.Errorf("not valid YAML or JSON: %w", err)
	}
	if raw == nil {
		return errors.New("empty: want a KubeletConfiguration (apiVersion: " + APIVersion + ")")
	}
	if v, _ := raw["apiVersion"].(string); v != APIVersion {
		return fmt.Errorf("apiVersion %q: want %q", v, APIVersion)
	}
	if k, _ := raw["kind"].(string); k != Kind {
		return fmt.Errorf("kind %q: want %q", k, Kind)
	}
	var file kubeletv1beta1.KubeletConfiguration
	if err := yaml.Unmarshal(data, &file); err != nil {
		return err
	}
	c.Warnings = append(c.Warnings, unhonouredWarnings(raw, &file)...)
	if gates, ok := raw["featureGates"].(map[string]any); ok {
		for _, g := range slices.Sorted(maps.Keys(gates)) {
			if !slices.Contains(ActedOnGates, g) {
				c.Warnings = append(c.Warnings, fmt.Sprintf("featureGates.%s: nodeagent does not act on this gate; ignored", g))
			}
		}
	}
	readOnlyPort := file.ReadOnlyPort
	fillZero(reflect.ValueOf(&file).Elem(), reflect.ValueOf(&c.KubeletConfiguration).Elem())
	if _, set := raw["readOnlyPort"]; set {
		file.ReadOnlyPort = readOnlyPort
	}
	c.KubeletConfiguration = file
	if len(c.QOSReserved) > 0 && !c.FeatureGates["QOSReserved"] {
		c.Warnings = append(c.Warnings, "qosReserved is not applied: as in the kubelet, it needs featureGates: {QOSReserved: true}")
	}
	c.Warnings = append(c.Warnings, c.enforcementWarnings()...)
	return nil
}

// fillZero sets every zero field of dst to def's, descending into structs
// (a nil pointer, map or slice is zero; an empty non-nil one is a value,
// as evictionHard: {} is in the kubelet).
func fillZero(dst, def reflect.Value) {
	for i := 0; i < dst.NumField(); i++ {
		f, d := dst.Field(i), def.Field(i)
		switch {
		case !f.CanSet():
		case f.Kind() == reflect.Struct:
			fillZero(f, d)
		case f.IsZero():
			f.Set(d)
		}
	}
}

// unhonouredWarnings names the fields nodeagent does not implement that the
// file sets to something other than the kubelet's default: those would
// change a kubelet's behaviour and do not change nodeagent's. A zero or
// default value (kubeadm writes many) asks for nothing and is accepted
// quietly, as is every honoured field.
func unhonouredWarnings(raw map[string]any, file *kubeletv1beta1.KubeletConfiguration) []string {
	honoured := map[string]bool{"apiVersion": true, "kind": true}
	for _, f := range Honoured {
		honoured[f] = true
	}
	values := fieldValues(reflect.ValueOf(file).Elem())
	var out []string
	for _, k := range slices.Sorted(maps.Keys(raw)) {
		switch {
		case !values[k].IsValid():
			out = append(out, fmt.Sprintf("unknown field %q: not a KubeletConfiguration field, ignored", k))
		case honoured[k]:
		case isZeroValue(values[k]), isKubeletDefault(k, raw[k]):
		default:
			out = append(out, fmt.Sprintf("%s: %s is not honoured by nodeagent and is ignored (it behaves as the kubelet's default)", k, brief(raw[k])))
		}
	}
	return out
}

// isZeroValue reports whether v reads as its type's zero value: a
// quantity parsed from "0" keeps its format, so reflect calls it non-zero.
func isZeroValue(v reflect.Value) bool {
	a, errA := json.Marshal(v.Interface())
	b, errB := json.Marshal(reflect.Zero(v.Type()).Interface())
	return errA == nil && errB == nil && string(a) == string(b)
}

// kubeletDefaults are the kubelet's non-zero defaults of fields nodeagent
// does not implement (pkg/kubelet/apis/config/v1beta1/defaults.go): a
// file that spells one out asks for what nodeagent does anyway.
var kubeletDefaults = map[string]any{
	"cpuManagerReconcilePeriod":      "10s",
	"topologyManagerScope":           "container",
	"hairpinMode":                    "promiscuous-bridge",
	"httpCheckFrequency":             "20s",
	"streamingConnectionIdleTimeout": "4h",
	"oomScoreAdj":                    -999.0,
	"registryPullQPS":                5.0,
	"registryBurst":                  10.0,
	"maxOpenFiles":                   1000000.0,
	"contentType":                    "application/vnd.kubernetes.protobuf",
	"volumePluginDir":                "/usr/libexec/kubernetes/kubelet-plugins/volume/exec/",
	"enableControllerAttachDetach":   true,
	"makeIPTablesUtilChains":         true,
	"enableServer":                   true,
	"enableDebuggingHandlers":        true,
	"enableSystemLogHandler":         true,
	"localStorageCapacityIsolation":  true,
	"iptablesMasqueradeBit":          14.0,
	"iptablesDropBit":                15.0,
	"containerLogMaxWorkers":         1.0,
	"mergeDefaultEvictionSettings":   false,
}

// isKubeletDefault reports whether a file's value is the kubelet's default
// for the field; durations compare by length ("10s" is "0h0m10s").
func isKubeletDefault(field string, v any) bool {
	def, ok := kubeletDefaults[field]
	if !ok {
		return false
	}
	if a, b := fmt.Sprint(v), fmt.Sprint(def); a != b {
		da, errA := time.ParseDuration(a)
		db, errB := time.ParseDuration(b)
		return errA == nil && errB == nil && da == db
	}
	return true
}

// brief prints a file's value for a warning, cut to one short line: the
// value could be a long list.
func brief(v any) string {
	s := fmt.Sprintf("%v", v)
	if b, err := yaml.Marshal(v); err == nil {
		s = strings.TrimSpace(strings.ReplaceAll(string(b), "\n", " "))
	}
	if len(s) > 60 {
		s = s[:57] + "..."
	}
	return strconv.Quote(s)
}

// fieldValues maps a struct's JSON field names to its field values,
// inlined structs' (TypeMeta's) included.
func fieldValues(v reflect.Value) map[string]reflect.Value {
	out := map[string]reflect.Value{}
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case strings.Contains(opts, "inline") || (f.Anonymous && name == ""):
			maps.Copy(out, fieldValues(v.Field(i)))
		case name != "" && name != "-":
			out[name] = v.Field(i)
		}
	}
	return out
}

// reservedFields are the reservations enforceNodeAllocatable names.
var reservedFields = map[string]string{"system-reserved": "systemReserved", "kube-reserved": "kubeReserved"}

// enforcementWarnings say what nodeagent does for enforceNodeAllocatable
// entries it does not enforce the kubelet's way: it keeps no limits on
// systemReservedCgroup or kubeReservedCgroup.
func (c *Config) enforcementWarnings() []string {
	var out []string
	for _, k := range c.EnforceNodeAllocatable {
		if reserved := reservedFields[strings.TrimSuffix(k, "-compressible")]; reserved != "" {
			out = append(out, fmt.Sprintf("enforceNodeAllocatable: %s is not enforced: nodeagent sets no limits on the %sCgroup; "+
				"the %s reservation is still taken out of allocatable and, with pods, out of the kubepods limits", k, reserved, reserved))
		}
	}
	return out
}

// ActedOnGates are the feature gates nodeagent reads (featureGates in
// the file); every other gate is ignored with a warning.
var ActedOnGates = []string{"MemoryQoS", "QOSReserved"}

// parsePercent reads the kubelet's "NN%" form, 0 to 100.
func parsePercent(v string) (int64, error) {
	n, err := strconv.ParseInt(strings.TrimSuffix(v, "%"), 10, 64)
	if !strings.HasSuffix(v, "%") || err != nil || n < 0 || n > 100 {
		return 0, errors.New("want a percentage from 0% to 100%")
	}
	return n, nil
}

var reservableResources = map[string]bool{"cpu": true, "memory": true, "pid": true, "ephemeral-storage": true}

var enforceKeys = map[string]bool{
	"pods": true, "system-reserved": true, "kube-reserved": true,
	"system-reserved-compressible": true, "kube-reserved-compressible": true, "none": true,
}

// fields is the configuration as its file's field names and values.
func (c *Config) fields() (map[string]any, error) {
	data, err := yaml.Marshal(c.KubeletConfiguration)
	if err != nil {
		return nil, err
	}
	var all map[string]any
	return all, yaml.Unmarshal(data, &all)
}
