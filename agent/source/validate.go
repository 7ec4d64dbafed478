package source

import (
	"path"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// validate checks a defaulted static pod for what the agent relies on, with
// the API server's field paths in its messages. It is not the full API
// validation: it covers names, containers, images, ports, resources,
// policies, DNS and volume mounts. A valid spec that uses what the agent
// cannot honour (API object references, other volume types) is not an
// error here: admission rejects it, visibly, in the pod's status.
func validate(pod *corev1.Pod) field.ErrorList {
	var errs field.ErrorList
	meta := field.NewPath("metadata")
	for _, msg := range validation.IsDNS1123Subdomain(pod.Name) {
		errs = append(errs, field.Invalid(meta.Child("name"), pod.Name, msg))
	}
	for _, msg := range validation.IsDNS1123Label(pod.Namespace) {
		errs = append(errs, field.Invalid(meta.Child("namespace"), pod.Namespace, msg))
	}

	spec := field.NewPath("spec")
	s := &pod.Spec
	if len(s.Containers) == 0 {
		errs = append(errs, field.Required(spec.Child("containers"), "a pod needs at least one container"))
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
	if g := s.TerminationGracePeriodSeconds; g != nil && *g < 0 {
		errs = append(errs, field.Invalid(spec.Child("terminationGracePeriodSeconds"), *g, "must be >= 0"))
	}
	if s.Hostname != "" {
		for _, msg := range validation.IsDNS1123Label(s.Hostname) {
			errs = append(errs, field.Invalid(spec.Child("hostname"), s.Hostname, msg))
		}
	}

	volumes := sets.New[string]()
	for i, v := range s.Volumes {
		p := spec.Child("volumes").Index(i)
		if volumes.Has(v.Name) {
			errs = append(errs, field.Duplicate(p.Child("name"), v.Name))
		}
		volumes.Insert(v.Name)
		if v.HostPath != nil && !path.IsAbs(v.HostPath.Path) {
			errs = append(errs, field.Invalid(p.Child("hostPath", "path"), v.HostPath.Path, "must be an absolute path"))
		}
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
	if c.RestartPolicy != nil {
		if !init || *c.RestartPolicy != corev1.ContainerRestartPolicyAlways {
			errs = append(errs, field.NotSupported(p.Child("restartPolicy"), *c.RestartPolicy, []string{"Always (init containers only)"}))
		}
	}

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
	for _, list := range []struct {
		name string
		l    corev1.ResourceList
	}{{"requests", c.Resources.Requests}, {"limits", c.Resources.Limits}} {
		for name, q := range list.l {
			if q.Sign() < 0 {
				errs = append(errs, field.Invalid(rp.Child(list.name).Key(string(name)), q.String(), "must be >= 0"))
			}
		}
	}
	for name, req := range c.Resources.Requests {
		if lim, ok := c.Resources.Limits[name]; ok && req.Cmp(lim) > 0 {
			errs = append(errs, field.Invalid(rp.Child("requests").Key(string(name)), req.String(), "must be less than or equal to "+string(name)+" limit of "+lim.String()))
		}
	}

	for i, e := range c.Env {
		ep := p.Child("env").Index(i)
		if e.Name == "" || strings.Contains(e.Name, "=") {
			errs = append(errs, field.Invalid(ep.Child("name"), e.Name, "must be non-empty and without '='"))
		}
	}
	for i, m := range c.VolumeMounts {
		mp := p.Child("volumeMounts").Index(i)
		if !volumes.Has(m.Name) {
			errs = append(errs, field.NotFound(mp.Child("name"), m.Name))
		}
		if !path.IsAbs(m.MountPath) {
			errs = append(errs, field.Invalid(mp.Child("mountPath"), m.MountPath, "must be an absolute path"))
		}
	}
	return errs
}
