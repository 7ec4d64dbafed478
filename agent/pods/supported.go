package pods

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"nodeagent/agent/source"
	"nodeagent/agent/volumes"
)

// unsupported lists what a valid pod spec asks for that the agent cannot
// honour: volume types it has no plugin for, a user namespace
// (hostUsers: false), and, for static pods,
// references to API objects (the kubelet's PreventStaticPodAPIReferences:
// a static pod must run without an API server). Admission rejects such a
// pod with reason UnsupportedPodSpec instead of running it half right.
func unsupported(pod *corev1.Pod) field.ErrorList {
	var errs field.ErrorList
	static := !source.FromAPI(pod)
	spec := field.NewPath("spec")
	apiRef := func(p *field.Path, what string) {
		if static {
			errs = append(errs, field.Forbidden(p, "static pods may not reference API objects ("+what+")"))
		}
	}
	errs = append(errs, volumes.Check(pod, static)...)
	check := func(cs []corev1.Container, path *field.Path, init bool) {
		for i := range cs {
			c := &cs[i]
			for j, e := range c.Env {
				if e.ValueFrom != nil && e.ValueFrom.ConfigMapKeyRef != nil {
					apiRef(path.Index(i).Child("env").Index(j).Child("valueFrom", "configMapKeyRef"), "configMapKeyRef")
				}
				if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
					apiRef(path.Index(i).Child("env").Index(j).Child("valueFrom", "secretKeyRef"), "secretKeyRef")
				}
			}
			if len(c.EnvFrom) > 0 {
				apiRef(path.Index(i).Child("envFrom"), "envFrom")
			}
			errs = append(errs, restartRulesUnsupported(c, path.Index(i), init)...)
		}
	}
	check(pod.Spec.InitContainers, spec.Child("initContainers"), true)
	check(pod.Spec.Containers, spec.Child("containers"), false)
	if len(pod.Spec.ImagePullSecrets) > 0 {
		apiRef(spec.Child("imagePullSecrets"), "imagePullSecrets")
	}
	// Ignored, it would run the pod as the host's root: refused until user
	// namespaces are implemented.
	if u := pod.Spec.HostUsers; u != nil && !*u {
		errs = append(errs, field.Forbidden(spec.Child("hostUsers"), "user namespaces (hostUsers: false) are not supported by nodeagent yet; the pod would run in the host's user namespace"))
	}
	return errs
}

// restartRulesUnsupported refuses what the agent does not do yet of 1.37's
// container restart rules: a restart policy of a regular container's own,
// an init container's other than a sidecar's Always, and restart rules
// (RestartAllContainers ones are refused as a missing node feature).
func restartRulesUnsupported(c *corev1.Container, p *field.Path, init bool) field.ErrorList {
	var errs field.ErrorList
	if c.RestartPolicy != nil && (!init || *c.RestartPolicy != corev1.ContainerRestartPolicyAlways) {
		errs = append(errs, field.Forbidden(p.Child("restartPolicy"), "a container's own restart policy (other than a sidecar's Always) is not supported by nodeagent yet"))
	}
	for i, r := range c.RestartPolicyRules {
		if r.Action != corev1.ContainerRestartRuleActionRestartAllContainers {
			errs = append(errs, field.Forbidden(p.Child("restartPolicyRules").Index(i), "container restart rules are not supported by nodeagent yet"))
		}
	}
	return errs
}
