package manifest

import (
	"fmt"
	"math"
	"path"
	"regexp"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"nodeagent/internal/sat"
)

// Limits the agent adds to the API server's, because it derives host paths
// and per-container state from pod data.
const (
	// MaxFileName is the longest file name a Linux filesystem takes: the
	// pod's log directory <namespace>_<name>_<uid> must fit in it.
	MaxFileName = 255
	// MaxContainers bounds the init, app and ephemeral containers of one
	// pod. The API server sets none (only the object's size); each
	// container costs the agent a log directory, probes and a status.
	MaxContainers = 256
	// maxUID bounds a pod UID, which names directories and cgroups.
	maxUID = 128
)

var uidPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]*$`)

// Validate checks a defaulted pod for what the agent relies on, with the
// API server's field paths and ranges in its messages: names, labels and
// annotations, containers, images, ports, resources (within int64, so
// nothing derived from them wraps), policies, DNS, volumes and their
// mounts (a subPath stays inside its volume). It adds the limits that keep
// every host path derived from the pod valid (see MaxFileName,
// MaxContainers). It is not the full API validation: a valid spec that
// asks for what the agent cannot honour (API object references, other
// volume types) is rejected at admission, visibly, in the pod's status.
//
// Every source runs it: a pod that fails it never reaches a pod worker.
func Validate(pod *corev1.Pod) field.ErrorList {
	meta := field.NewPath("metadata")
	errs := CheckNames(pod.Namespace, pod.Name, pod.UID)
	errs = append(errs, metavalidation.ValidateLabels(pod.Labels, meta.Child("labels"))...)
	errs = append(errs, apivalidation.ValidateAnnotations(pod.Annotations, meta.Child("annotations"))...)

	spec := field.NewPath("spec")
	s := &pod.Spec
	if len(s.Containers) == 0 {
		errs = append(errs, field.Required(spec.Child("containers"), "a pod needs at least one container"))
	}
	if n := len(s.InitContainers) + len(s.Containers) + len(s.EphemeralContainers); n > MaxContainers {
		errs = append(errs, field.TooMany(spec.Child("containers"), n, MaxContainers))
	}
	switch s.RestartPolicy {
	case corev1.RestartPolicyAlways, corev1.RestartPolicyOnFailure, corev1.RestartPolicyNever:
	default:
		errs = append(errs, field.NotSupported(spec.Child("restartPolicy"), s.RestartPolicy, []string{"Always", "OnFailure", "Never"}))
	}
	switch s.DNSPolicy {
	case corev1.DNSClusterFirst, corev1.DNSClusterFirstWithHostNet, corev1.DNSDefault:
	case corev1.DNSNone:
		if s.DNSConfig == nil || len(s.DNSConfig.Nameservers) == 0 {
			errs = append(errs, field.Required(spec.Child("dnsConfig", "nameservers"), "dnsPolicy None needs at least one nameserver"))
		}
	default:
		errs = append(errs, field.NotSupported(spec.Child("dnsPolicy"), s.DNSPolicy, []string{"ClusterFirst", "ClusterFirstWithHostNet", "Default", "None"}))
	}
	// No upper bound, as in the API server: a huge grace period means "wait
	// as long as can be waited" (see sat.Seconds), never a wrapped deadline.
	if g := s.TerminationGracePeriodSeconds; g != nil && *g < 0 {
		errs = append(errs, field.Invalid(spec.Child("terminationGracePeriodSeconds"), *g, "must be >= 0"))
	}
	if d := s.ActiveDeadlineSeconds; d != nil && (*d < 1 || *d > math.MaxUint32) {
		errs = append(errs, field.Invalid(spec.Child("activeDeadlineSeconds"), *d, validation.InclusiveRangeError(1, math.MaxUint32)))
	}
	for name, v := range map[string]string{"hostname": s.Hostname, "subdomain": s.Subdomain} {
		if v == "" {
			continue
		}
		for _, msg := range validation.IsDNS1123Label(v) {
			errs = append(errs, field.Invalid(spec.Child(name), v, msg))
		}
	}
	errs = append(errs, validateHostnameOverride(s, spec)...)
	errs = append(errs, validateFileKeyRefs(s, spec)...)
	errs = append(errs, validateUserNamespace(s, spec)...)
	errs = append(errs, validateResourceList(s.Overhead, spec.Child("overhead"))...)

	volumes := sets.New[string]()
	for i, v := range s.Volumes {
		p := spec.Child("volumes").Index(i)
		// The name becomes a directory under the pod's: it must be one
		// path element, never "..".
		if v.Name == "" {
			errs = append(errs, field.Required(p.Child("name"), ""))
		}
		for _, msg := range validation.IsDNS1123Label(v.Name) {
			if v.Name != "" {
				errs = append(errs, field.Invalid(p.Child("name"), v.Name, msg))
			}
		}
		if volumes.Has(v.Name) {
			errs = append(errs, field.Duplicate(p.Child("name"), v.Name))
		}
		volumes.Insert(v.Name)
		if v.HostPath != nil {
			errs = append(errs, validateHostPath(v.HostPath, p.Child("hostPath"))...)
		}
		if img := v.Image; img != nil {
			errs = append(errs, validateImageVolume(img, p.Child("image"))...)
		}
		if v.EmptyDir != nil && v.EmptyDir.SizeLimit != nil {
			errs = append(errs, validateQuantity(corev1.ResourceEphemeralStorage, *v.EmptyDir.SizeLimit, p.Child("emptyDir", "sizeLimit"))...)
		}
		errs = append(errs, validateVolumePaths(&v, p)...)
	}

	names := sets.New[string]()
	for i := range s.InitContainers {
		errs = append(errs, validateContainer(&s.InitContainers[i], spec.Child("initContainers").Index(i), names, volumes, true)...)
	}
	for i := range s.Containers {
		errs = append(errs, validateContainer(&s.Containers[i], spec.Child("containers").Index(i), names, volumes, false)...)
	}
	return errs
}

// CheckNames checks the names host paths are derived from: namespace,
// name and UID (the log directory <namespace>_<name>_<uid> and the pod's
// directory) and container names, each one path element within the
// filesystem's limits. Validate runs it; nodectl runs it on what the
// read-only API lists before it reads a log file as root.
func CheckNames(namespace, name string, uid types.UID, containers ...string) field.ErrorList {
	var errs field.ErrorList
	meta := field.NewPath("metadata")
	for _, msg := range validation.IsDNS1123Subdomain(name) {
		errs = append(errs, field.Invalid(meta.Child("name"), name, msg))
	}
	for _, msg := range validation.IsDNS1123Label(namespace) {
		errs = append(errs, field.Invalid(meta.Child("namespace"), namespace, msg))
	}
	if len(uid) > maxUID || !uidPattern.MatchString(string(uid)) {
		errs = append(errs, field.Invalid(meta.Child("uid"), uid, fmt.Sprintf("must be 1-%d characters of [A-Za-z0-9_-], starting with a letter or digit", maxUID)))
	}
	if logDir := len(namespace) + len(name) + len(uid) + 2; logDir > MaxFileName {
		errs = append(errs, field.Invalid(meta.Child("name"), name, fmt.Sprintf(
			"must be no more than %d characters in namespace %q: the pod's log directory <namespace>_<name>_<uid> must fit in a %d-byte file name",
			max(MaxFileName-len(namespace)-len(uid)-2, 0), namespace, MaxFileName)))
	}
	for _, c := range containers {
		for _, msg := range validation.IsDNS1123Label(c) {
			errs = append(errs, field.Invalid(field.NewPath("spec", "containers").Key(c).Child("name"), c, msg))
		}
	}
	return errs
}

func validateContainer(c *corev1.Container, p *field.Path, names, volumes sets.Set[string], init bool) field.ErrorList {
	var errs field.ErrorList
	if c.Name == "" {
		errs = append(errs, field.Required(p.Child("name"), ""))
	} else {
		for _, msg := range validation.IsDNS1123Label(c.Name) {
			errs = append(errs, field.Invalid(p.Child("name"), c.Name, msg))
		}
		if names.Has(c.Name) {
			errs = append(errs, field.Duplicate(p.Child("name"), c.Name))
		}
		names.Insert(c.Name)
	}
	// An unparseable image name is not a manifest error: as with the
	// kubelet, the container then waits with reason InvalidImageName.
	if strings.TrimSpace(c.Image) == "" {
		errs = append(errs, field.Required(p.Child("image"), ""))
	}
	switch c.ImagePullPolicy {
	case corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever:
	default:
		errs = append(errs, field.NotSupported(p.Child("imagePullPolicy"), c.ImagePullPolicy, []string{"Always", "IfNotPresent", "Never"}))
	}
	errs = append(errs, validateRestartRules(c, p)...)

	ports := sets.New[string]()
	for i, port := range c.Ports {
		pp := p.Child("ports").Index(i)
		if port.ContainerPort < 1 || port.ContainerPort > 65535 {
			errs = append(errs, field.Invalid(pp.Child("containerPort"), port.ContainerPort, "must be between 1 and 65535"))
		}
		if port.HostPort < 0 || port.HostPort > 65535 {
			errs = append(errs, field.Invalid(pp.Child("hostPort"), port.HostPort, "must be between 0 and 65535"))
		}
		switch port.Protocol {
		case corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP:
		default:
			errs = append(errs, field.NotSupported(pp.Child("protocol"), port.Protocol, []string{"TCP", "UDP", "SCTP"}))
		}
		if port.Name != "" {
			for _, msg := range validation.IsValidPortName(port.Name) {
				errs = append(errs, field.Invalid(pp.Child("name"), port.Name, msg))
			}
			if ports.Has(port.Name) {
				errs = append(errs, field.Duplicate(pp.Child("name"), port.Name))
			}
			ports.Insert(port.Name)
		}
	}

	rp := p.Child("resources")
	errs = append(errs, validateResourceList(c.Resources.Requests, rp.Child("requests"))...)
	errs = append(errs, validateResourceList(c.Resources.Limits, rp.Child("limits"))...)
	for name, req := range c.Resources.Requests {
		// Compared only within range: comparing two huge quantities is the
		// slow arithmetic the range check spares.
		if lim, ok := c.Resources.Limits[name]; ok && sat.FitsValue(req) && sat.FitsValue(lim) && req.Cmp(lim) > 0 {
			errs = append(errs, field.Invalid(rp.Child("requests").Key(string(name)), req.String(), "must be less than or equal to "+string(name)+" limit of "+lim.String()))
		}
	}

	for i, e := range c.Env {
		ep := p.Child("env").Index(i)
		if e.Name == "" {
			errs = append(errs, field.Required(ep.Child("name"), ""))
			continue
		}
		for _, msg := range validation.IsEnvVarName(e.Name) {
			errs = append(errs, field.Invalid(ep.Child("name"), e.Name, msg))
		}
		if e.ValueFrom != nil && e.ValueFrom.ResourceFieldRef != nil {
			errs = append(errs, validateDivisor(e.ValueFrom.ResourceFieldRef, ep.Child("valueFrom", "resourceFieldRef", "divisor"))...)
		}
	}
	mountPaths := sets.New[string]()
	for i, m := range c.VolumeMounts {
		mp := p.Child("volumeMounts").Index(i)
		if !volumes.Has(m.Name) {
			errs = append(errs, field.NotFound(mp.Child("name"), m.Name))
		}
		if !path.IsAbs(m.MountPath) {
			errs = append(errs, field.Invalid(mp.Child("mountPath"), m.MountPath, "must be an absolute path"))
		} else if mountPaths.Has(path.Clean(m.MountPath)) {
			errs = append(errs, field.Invalid(mp.Child("mountPath"), m.MountPath, "must be unique"))
		}
		mountPaths.Insert(path.Clean(m.MountPath))
		if m.SubPath != "" && m.SubPathExpr != "" {
			errs = append(errs, field.Invalid(mp.Child("subPathExpr"), m.SubPathExpr, "subPathExpr and subPath are mutually exclusive"))
		}
		if m.SubPath != "" {
			if err := CheckSubPath(m.SubPath); err != nil {
				errs = append(errs, field.Invalid(mp.Child("subPath"), m.SubPath, err.Error()))
			}
		}
		if m.SubPathExpr != "" {
			if err := CheckSubPath(m.SubPathExpr); err != nil {
				errs = append(errs, field.Invalid(mp.Child("subPathExpr"), m.SubPathExpr, err.Error()))
			}
		}
	}
	return errs
}

// CheckSubPath refuses a subPath that could leave its volume by name: an
// absolute path or one with a ".." element (the API server's
// validateLocalDescendingPath). It is checked again after subPathExpr
// expansion; symlinks are the resolver's business (pods.resolveSubPath).
func CheckSubPath(p string) error {
	if path.IsAbs(p) {
		return fmt.Errorf("must be a relative path")
	}
	for _, elem := range strings.Split(p, "/") {
		if elem == ".." {
			return fmt.Errorf("must not contain '..'")
		}
	}
	return nil
}

// The divisors the API server accepts for a resourceFieldRef.
var (
	cpuDivisors   = sets.New("1m", "1")
	bytesDivisors = sets.New("1", "1k", "1M", "1G", "1T", "1P", "1E", "1Ki", "1Mi", "1Gi", "1Ti", "1Pi", "1Ei")
)

func validateDivisor(ref *corev1.ResourceFieldSelector, p *field.Path) field.ErrorList {
	if ref.Divisor.IsZero() {
		return nil
	}
	allowed := bytesDivisors
	if strings.HasSuffix(ref.Resource, ".cpu") {
		allowed = cpuDivisors
	}
	if !allowed.Has(ref.Divisor.String()) {
		return field.ErrorList{field.NotSupported(p, ref.Divisor.String(), sets.List(allowed))}
	}
	return nil
}

// validateResourceList checks names and quantities: non-negative, and
// small enough that every value the agent derives (milli-CPU, bytes,
// sums) stays within int64.
func validateResourceList(list corev1.ResourceList, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for name, q := range list {
		kp := p.Key(string(name))
		for _, msg := range validation.IsQualifiedName(string(name)) {
			errs = append(errs, field.Invalid(kp, name, msg))
		}
		errs = append(errs, validateQuantity(name, q, kp)...)
	}
	return errs
}

func validateQuantity(name corev1.ResourceName, q resource.Quantity, p *field.Path) field.ErrorList {
	switch {
	case q.Sign() < 0:
		return field.ErrorList{field.Invalid(p, q.String(), "must be greater than or equal to 0")}
	case name == corev1.ResourceCPU && !sat.FitsMilli(q):
		return field.ErrorList{field.Invalid(p, q.String(), fmt.Sprintf("must be at most %dm", int64(math.MaxInt64)))}
	case !sat.FitsValue(q):
		return field.ErrorList{field.Invalid(p, q.String(), fmt.Sprintf("must be at most %d", int64(math.MaxInt64)))}
	}
	return nil
}

// validateVolumePaths checks the file paths a content volume's items name
// as the API server does (validateKeyToPath, validateLocalDescendingPath):
// present, relative, without a ".." element, not starting with "..". A
// static pod is never seen by an API server; the writer checks them again.
func validateVolumePaths(v *corev1.Volume, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	check := func(fp *field.Path, s string) {
		switch {
		case s == "":
			errs = append(errs, field.Required(fp, ""))
		case path.IsAbs(s):
			errs = append(errs, field.Invalid(fp, s, "must be a relative path"))
		case slices.Contains(strings.Split(s, "/"), ".."):
			errs = append(errs, field.Invalid(fp, s, "must not contain '..'"))
		case strings.HasPrefix(s, ".."):
			errs = append(errs, field.Invalid(fp, s, "must not start with '..'"))
		}
	}
	each := func(fp *field.Path, n int, path func(int) string) {
		for i := range n {
			check(fp.Index(i).Child("path"), path(i))
		}
	}
	items := func(fp *field.Path, list []corev1.KeyToPath) {
		each(fp, len(list), func(i int) string { return list[i].Path })
	}
	files := func(fp *field.Path, list []corev1.DownwardAPIVolumeFile) {
		each(fp, len(list), func(i int) string { return list[i].Path })
	}
	switch {
	case v.ConfigMap != nil:
		items(p.Child("configMap", "items"), v.ConfigMap.Items)
	case v.Secret != nil:
		items(p.Child("secret", "items"), v.Secret.Items)
	case v.DownwardAPI != nil:
		files(p.Child("downwardAPI", "items"), v.DownwardAPI.Items)
	case v.Projected != nil:
		for j, src := range v.Projected.Sources {
			sp := p.Child("projected", "sources").Index(j)
			switch {
			case src.ConfigMap != nil:
				items(sp.Child("configMap", "items"), src.ConfigMap.Items)
			case src.Secret != nil:
				items(sp.Child("secret", "items"), src.Secret.Items)
			case src.DownwardAPI != nil:
				files(sp.Child("downwardAPI", "items"), src.DownwardAPI.Items)
			case src.ServiceAccountToken != nil:
				check(sp.Child("serviceAccountToken", "path"), src.ServiceAccountToken.Path)
			}
		}
	}
	return errs
}

// hostPathTypes are the API server's values of hostPath.type.
var hostPathTypes = []string{"", "DirectoryOrCreate", "Directory", "FileOrCreate", "File", "Socket", "CharDevice", "BlockDevice"}

// validateHostPath is the API server's check (no "..", a known type),
// and an absolute path: the agent would resolve a relative one against
// its own working directory.
func validateHostPath(h *corev1.HostPathVolumeSource, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if !path.IsAbs(h.Path) {
		errs = append(errs, field.Invalid(p.Child("path"), h.Path, "must be an absolute path"))
	}
	if slices.Contains(strings.Split(h.Path, "/"), "..") {
		errs = append(errs, field.Invalid(p.Child("path"), h.Path, "must not contain '..'"))
	}
	if h.Type != nil && !slices.Contains(hostPathTypes, string(*h.Type)) {
		errs = append(errs, field.NotSupported(p.Child("type"), *h.Type, hostPathTypes))
	}
	return errs
}

// validateRestartRules checks a container's restartPolicy and
// restartPolicyRules as the 1.37 API server does (ContainerRestartRules
// and RestartAllContainersOnContainerExits on): a policy of the three, and
// rules only with a policy, at most 20, each with exit codes (In or NotIn,
// at most 255 values).
func validateRestartRules(c *corev1.Container, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if c.RestartPolicy != nil {
		switch *c.RestartPolicy {
		case corev1.ContainerRestartPolicyAlways, corev1.ContainerRestartPolicyOnFailure, corev1.ContainerRestartPolicyNever:
		default:
			errs = append(errs, field.NotSupported(p.Child("restartPolicy"), *c.RestartPolicy, []string{"Always", "OnFailure", "Never"}))
		}
	}
	if len(c.RestartPolicyRules) == 0 {
		return errs
	}
	rp := p.Child("restartPolicyRules")
	if c.RestartPolicy == nil {
		errs = append(errs, field.Required(p.Child("restartPolicy"), "must specify restartPolicy when restart rules are used"))
	}
	if len(c.RestartPolicyRules) > 20 {
		errs = append(errs, field.TooMany(rp, len(c.RestartPolicyRules), 20))
	}
	for i, r := range c.RestartPolicyRules {
		ip := rp.Index(i)
		switch r.Action {
		case corev1.ContainerRestartRuleActionRestart, corev1.ContainerRestartRuleActionRestartAllContainers:
		default:
			errs = append(errs, field.NotSupported(ip.Child("action"), r.Action, []string{"Restart", "RestartAllContainers"}))
		}
		if r.ExitCodes == nil {
			errs = append(errs, field.Required(ip.Child("exitCodes"), "must be specified"))
			continue
		}
		switch r.ExitCodes.Operator {
		case corev1.ContainerRestartRuleOnExitCodesOpIn, corev1.ContainerRestartRuleOnExitCodesOpNotIn:
		default:
			errs = append(errs, field.NotSupported(ip.Child("exitCodes", "operator"), r.ExitCodes.Operator, []string{"In", "NotIn"}))
		}
		if len(r.ExitCodes.Values) > 255 {
			errs = append(errs, field.TooMany(ip.Child("exitCodes", "values"), len(r.ExitCodes.Values), 255))
		}
	}
	return errs
}

// validateHostnameOverride is the API server's check of 1.37's
// hostnameOverride: a DNS subdomain of at most 64 characters, not with
// setHostnameAsFQDN or hostNetwork.
func validateHostnameOverride(s *corev1.PodSpec, spec *field.Path) field.ErrorList {
	var errs field.ErrorList
	o := s.HostnameOverride
	if o == nil {
		return nil
	}
	p := spec.Child("hostnameOverride")
	if s.SetHostnameAsFQDN != nil && *s.SetHostnameAsFQDN {
		errs = append(errs, field.Forbidden(p, "may not be specified when setHostnameAsFQDN is true"))
	}
	if s.HostNetwork {
		errs = append(errs, field.Forbidden(p, "may not be specified when hostNetwork is true"))
	}
	if len(*o) > 64 {
		errs = append(errs, field.TooLong(p, "", 64))
	}
	for _, msg := range validation.IsDNS1123Subdomain(*o) {
		errs = append(errs, field.Invalid(p, *o, msg))
	}
	return errs
}

// validateFileKeyRefs is the API server's check of fileKeyRef env vars
// (1.35): a relaxed env var name as the key, a path without "..", and a
// volume of the pod that is an emptyDir.
func validateFileKeyRefs(s *corev1.PodSpec, spec *field.Path) field.ErrorList {
	var errs field.ErrorList
	emptyDir := map[string]bool{}
	for _, v := range s.Volumes {
		emptyDir[v.Name] = v.EmptyDir != nil
	}
	for _, group := range []struct {
		name string
		cs   []corev1.Container
	}{{"initContainers", s.InitContainers}, {"containers", s.Containers}} {
		for i, c := range group.cs {
			for j, e := range c.Env {
				if e.ValueFrom == nil || e.ValueFrom.FileKeyRef == nil {
					continue
				}
				ref, p := e.ValueFrom.FileKeyRef, spec.Child(group.name).Index(i).Child("env").Index(j).Child("valueFrom", "fileKeyRef")
				if ref.Key == "" {
					errs = append(errs, field.Required(p.Child("key"), ""))
				}
				for _, msg := range validation.IsRelaxedEnvVarName(ref.Key) {
					errs = append(errs, field.Invalid(p.Child("key"), ref.Key, msg))
				}
				switch isEmptyDir, found := emptyDir[ref.VolumeName]; {
				case !found:
					errs = append(errs, field.NotFound(p.Child("volumeName"), ref.VolumeName))
				case !isEmptyDir:
					errs = append(errs, field.Invalid(p.Child("volumeName"), ref.VolumeName, "referenced volume must be of type emptyDir"))
				}
				switch {
				case ref.Path == "":
					errs = append(errs, field.Required(p.Child("path"), ""))
				case slices.Contains(strings.Split(ref.Path, "/"), ".."):
					errs = append(errs, field.Invalid(p.Child("path"), ref.Path, "must not contain '..'"))
				}
			}
		}
	}
	return errs
}
