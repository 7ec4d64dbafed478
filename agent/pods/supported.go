package pods

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"nodeagent/agent/source"
	"nodeagent/agent/volumes"
)

// unsupported lists what a valid pod spec asks for that the agent cannot
// honour: volume types it has no plugin for, a user namespace
// (hostUsers: false) without a userns manager (userns), and, for static
// pods,
// references to API objects (the kubelet's PreventStaticPodAPIReferences:
// a static pod must run without an API server). Admission rejects such a
// pod with reason UnsupportedPodSpec instead of running it half right.
func unsupported(pod *corev1.Pod, userns bool) field.ErrorList {
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
			if len(c.VolumeDevices) > 0 {
				errs = append(errs, field.Forbidden(path.Index(i).Child("volumeDevices"), "block volumes are not supported by nodeagent"))
			}
			if len(c.Resources.Claims) > 0 {
				errs = append(errs, field.Forbidden(path.Index(i).Child("resources", "claims"), "dynamic resource allocation is not supported by nodeagent; the container would run without its devices"))
			}
			if c.Lifecycle != nil && c.Lifecycle.StopSignal != nil {
				errs = append(errs, field.Forbidden(path.Index(i).Child("lifecycle", "stopSignal"), "container stop signals (alpha) are not supported by nodeagent; the container would be stopped with its image's signal"))
			}
		}
	}
	check(pod.Spec.InitContainers, spec.Child("initContainers"), true)
	check(pod.Spec.Containers, spec.Child("containers"), false)
	if len(pod.Spec.ImagePullSecrets) > 0 {
		apiRef(spec.Child("imagePullSecrets"), "imagePullSecrets")
	}
	// Pod-level cpu and memory are honoured (qos, cgroups); hugepages and
	// claims would be ignored.
	if r := pod.Spec.Resources; r != nil {
		seen := map[corev1.ResourceName]bool{}
		for _, list := range []corev1.ResourceList{r.Requests, r.Limits} {
			for name := range list {
				if name != corev1.ResourceCPU && name != corev1.ResourceMemory && !seen[name] {
					seen[name] = true
					errs = append(errs, field.Forbidden(spec.Child("resources").Key(string(name)), "pod-level resources other than cpu and memory are not supported by nodeagent; the pod would run without its "+string(name)))
				}
			}
		}
		if len(r.Claims) > 0 {
			errs = append(errs, field.Forbidden(spec.Child("resources", "claims"), "dynamic resource allocation is not supported by nodeagent; the pod would run without its devices"))
		}
	}
	if len(pod.Spec.ResourceClaims) > 0 {
		errs = append(errs, field.Forbidden(spec.Child("resourceClaims"), "dynamic resource allocation is not supported by nodeagent; the pod would run without its devices"))
	}
	// Ignored, it would run the pod as the host's root.
	if u := pod.Spec.HostUsers; u != nil && !*u && !userns {
		errs = append(errs, field.Forbidden(spec.Child("hostUsers"), "user namespaces (hostUsers: false) are not enabled on this node; the pod would run in the host's user namespace"))
	}
	return errs
}
