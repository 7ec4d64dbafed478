package manifest

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// validateUserNamespace is the API server's validateHostUsers and its
// procMount rule: a pod in a user namespace shares none of the host's
// network, PID or IPC namespaces and has no block devices, and only such
// a pod may unmask /proc (it is the pod's own user namespace's). A static
// pod meets the same rules, as no API server checked it.
func validateUserNamespace(s *corev1.PodSpec, spec *field.Path) field.ErrorList {
	var errs field.ErrorList
	hostUsers := s.HostUsers == nil || *s.HostUsers
	if !hostUsers {
		if s.HostNetwork {
			errs = append(errs, field.Forbidden(spec.Child("hostNetwork"), "when `hostUsers` is false"))
		}
		if s.HostPID {
			errs = append(errs, field.Forbidden(spec.Child("HostPID"), "when `hostUsers` is false"))
		}
		if s.HostIPC {
			errs = append(errs, field.Forbidden(spec.Child("HostIPC"), "when `hostUsers` is false"))
		}
	}
	check := func(cs []corev1.Container, p *field.Path) {
		for i := range cs {
			c := &cs[i]
			if !hostUsers && len(c.VolumeDevices) > 0 {
				errs = append(errs, field.Forbidden(p.Index(i).Child("volumeDevices"), "when `hostUsers` is false"))
			}
			if c.SecurityContext == nil || c.SecurityContext.ProcMount == nil {
				continue
			}
			pm, pp := *c.SecurityContext.ProcMount, p.Index(i).Child("securityContext", "procMount")
			switch pm {
			case corev1.DefaultProcMount:
			case corev1.UnmaskedProcMount:
				if hostUsers {
					errs = append(errs, field.Invalid(pp, pm, "`hostUsers` must be false to use `Unmasked`"))
				}
			default:
				errs = append(errs, field.NotSupported(pp, pm, []corev1.ProcMountType{corev1.DefaultProcMount, corev1.UnmaskedProcMount}))
			}
		}
	}
	check(s.InitContainers, spec.Child("initContainers"))
	check(s.Containers, spec.Child("containers"))
	ephemeral := make([]corev1.Container, len(s.EphemeralContainers))
	for i := range s.EphemeralContainers {
		ephemeral[i] = corev1.Container(s.EphemeralContainers[i].EphemeralContainerCommon)
	}
	check(ephemeral, spec.Child("ephemeralContainers"))
	return errs
}
