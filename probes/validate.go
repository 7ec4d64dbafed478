package probes

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"nodeagent/internal/qos"
)

// Validate checks every probe and lifecycle hook of a defaulted pod as the
// API server's validation would, plus what only the node can know (a named
// port must exist in the container's ports), so a bad spec is refused at
// admission rather than failing probe after probe.
func Validate(pod *corev1.Pod) field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	grace := int64(corev1.DefaultTerminationGracePeriodSeconds)
	if g := pod.Spec.TerminationGracePeriodSeconds; g != nil {
		grace = *g
	}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		p := spec.Child("initContainers").Index(i)
		if !qos.IsSidecar(c) {
			for name, set := range map[string]bool{
				"livenessProbe": c.LivenessProbe != nil, "readinessProbe": c.ReadinessProbe != nil,
				"startupProbe": c.StartupProbe != nil, "lifecycle": c.Lifecycle != nil,
			} {
				if set {
					errs = append(errs, field.Forbidden(p.Child(name), "may not be set for init containers without restartPolicy=Always"))
				}
			}
			continue
		}
		errs = append(errs, validateContainer(c, p, grace)...)
	}
	for i := range pod.Spec.Containers {
		errs = append(errs, validateContainer(&pod.Spec.Containers[i], spec.Child("containers").Index(i), grace)...)
	}
	return errs
}

func validateContainer(c *corev1.Container, p *field.Path, grace int64) field.ErrorList {
	var errs field.ErrorList
	for _, k := range []struct {
		kind  Kind
		probe *corev1.Probe
		field string
	}{{Liveness, c.LivenessProbe, "livenessProbe"}, {Readiness, c.ReadinessProbe, "readinessProbe"}, {Startup, c.StartupProbe, "startupProbe"}} {
		if k.probe != nil {
			errs = append(errs, validateProbe(k.probe, k.kind, c, p.Child(k.field))...)
		}
	}
	if lc := c.Lifecycle; lc != nil {
		if lc.PostStart != nil {
			errs = append(errs, validateHook(lc.PostStart, c, p.Child("lifecycle", "postStart"), grace)...)
		}
		if lc.PreStop != nil {
			errs = append(errs, validateHook(lc.PreStop, c, p.Child("lifecycle", "preStop"), grace)...)
		}
	}
	return errs
}

func validateProbe(pr *corev1.Probe, kind Kind, c *corev1.Container, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	nonNegative := func(name string, v int32) {
		if v < 0 {
			errs = append(errs, field.Invalid(p.Child(name), v, "must be greater than or equal to 0"))
		}
	}
	positive := func(name string, v int32) {
		if v < 1 {
			errs = append(errs, field.Invalid(p.Child(name), v, "must be greater than or equal to 1"))
		}
	}
	nonNegative("initialDelaySeconds", pr.InitialDelaySeconds)
	positive("timeoutSeconds", pr.TimeoutSeconds)
	positive("periodSeconds", pr.PeriodSeconds)
	positive("successThreshold", pr.SuccessThreshold)
	positive("failureThreshold", pr.FailureThreshold)
	if kind != Readiness && pr.SuccessThreshold != 1 {
		errs = append(errs, field.Invalid(p.Child("successThreshold"), pr.SuccessThreshold, "must be 1"))
	}
	if g := pr.TerminationGracePeriodSeconds; g != nil {
		if kind == Readiness {
			errs = append(errs, field.Invalid(p.Child("terminationGracePeriodSeconds"), *g, "must not be set for readinessProbes"))
		} else if *g <= 0 {
			errs = append(errs, field.Invalid(p.Child("terminationGracePeriodSeconds"), *g, "must be greater than 0"))
		}
	}

	n := 0
	if h := pr.Exec; h != nil {
		n++
		if len(h.Command) == 0 {
			errs = append(errs, field.Required(p.Child("exec", "command"), ""))
		}
	}
	if h := pr.HTTPGet; h != nil {
		n++
		errs = append(errs, validateHTTPGet(h, c, p.Child("httpGet"))...)
	}
	if h := pr.TCPSocket; h != nil {
		n++
		errs = append(errs, validatePort(h.Port, c, p.Child("tcpSocket", "port"))...)
	}
	if h := pr.GRPC; h != nil {
		n++
		if h.Port < 1 || h.Port > 65535 {
			errs = append(errs, field.Invalid(p.Child("grpc", "port"), h.Port, "must be between 1 and 65535, inclusive"))
		}
	}
	switch {
	case n == 0:
		errs = append(errs, field.Required(p, "must specify a handler type (exec, httpGet, tcpSocket or grpc)"))
	case n > 1:
		errs = append(errs, field.Forbidden(p, "may not specify more than 1 handler type"))
	}
	return errs
}

func validateHook(h *corev1.LifecycleHandler, c *corev1.Container, p *field.Path, grace int64) field.ErrorList {
	var errs field.ErrorList
	n := 0
	if h.Exec != nil {
		n++
		if len(h.Exec.Command) == 0 {
			errs = append(errs, field.Required(p.Child("exec", "command"), ""))
		}
	}
	if h.HTTPGet != nil {
		n++
		errs = append(errs, validateHTTPGet(h.HTTPGet, c, p.Child("httpGet"))...)
	}
	if h.TCPSocket != nil {
		n++
		// The API accepts it for compatibility; the kubelet cannot run it.
		errs = append(errs, field.NotSupported(p.Child("tcpSocket"), "tcpSocket", []string{"exec", "httpGet", "sleep"}))
	}
	if h.Sleep != nil {
		n++
		if s := h.Sleep.Seconds; s < 0 || s > grace {
			errs = append(errs, field.Invalid(p.Child("sleep", "seconds"), s, "must be non-negative and less than or equal to terminationGracePeriodSeconds"))
		}
	}
	switch {
	case n == 0:
		errs = append(errs, field.Required(p, "must specify a handler type (exec, httpGet or sleep)"))
	case n > 1:
		errs = append(errs, field.Forbidden(p, "may not specify more than 1 handler type"))
	}
	return errs
}

func validateHTTPGet(h *corev1.HTTPGetAction, c *corev1.Container, p *field.Path) field.ErrorList {
	errs := validatePort(h.Port, c, p.Child("port"))
	switch h.Scheme {
	case "", corev1.URISchemeHTTP, corev1.URISchemeHTTPS:
	default:
		errs = append(errs, field.NotSupported(p.Child("scheme"), h.Scheme, []string{"HTTP", "HTTPS"}))
	}
	for i, hdr := range h.HTTPHeaders {
		for _, msg := range validation.IsHTTPHeaderName(hdr.Name) {
			errs = append(errs, field.Invalid(p.Child("httpHeaders").Index(i).Child("name"), hdr.Name, msg))
		}
	}
	return errs
}

func validatePort(port intstr.IntOrString, c *corev1.Container, p *field.Path) field.ErrorList {
	if port.Type == intstr.Int {
		if port.IntVal < 1 || port.IntVal > 65535 {
			return field.ErrorList{field.Invalid(p, port.IntVal, "must be between 1 and 65535, inclusive")}
		}
		return nil
	}
	if msgs := validation.IsValidPortName(port.StrVal); len(msgs) > 0 {
		return field.ErrorList{field.Invalid(p, port.StrVal, msgs[0])}
	}
	if _, err := ResolvePort(port, c); err != nil {
		return field.ErrorList{field.NotFound(p, port.StrVal)}
	}
	return nil
}
