package pods

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// unsupported lists what a valid pod spec asks for that the agent cannot
// honour: references to API objects, which static pods may not make (the
// kubelet's PreventStaticPodAPIReferences), and volume types other than
// emptyDir (on disk or in memory) and hostPath. Admission rejects such a
// pod with reason UnsupportedPodSpec instead of running it half right.
func unsupported(pod *corev1.Pod) field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	for i, v := range pod.Spec.Volumes {
		p := spec.Child("volumes").Index(i)
		switch {
		case v.EmptyDir != nil:
			if m := v.EmptyDir.Medium; m != corev1.StorageMediumDefault && m != corev1.StorageMediumMemory {
				errs = append(errs, field.NotSupported(p.Child("emptyDir", "medium"), m, []string{"", "Memory"}))
			}
		case v.HostPath != nil:
		case v.ConfigMap != nil, v.Secret != nil, v.Projected != nil, v.PersistentVolumeClaim != nil:
			errs = append(errs, field.Forbidden(p, "static pods may not reference API objects (configMap, secret, projected, persistentVolumeClaim)"))
		default:
			errs = append(errs, field.Forbidden(p, "only emptyDir and hostPath volumes are supported"))
		}
	}
	check := func(cs []corev1.Container, path *field.Path) {
		for i := range cs {
			c := &cs[i]
			for j, e := range c.Env {
				if e.ValueFrom != nil && (e.ValueFrom.ConfigMapKeyRef != nil || e.ValueFrom.SecretKeyRef != nil) {
					errs = append(errs, field.Forbidden(path.Index(i).Child("env").Index(j).Child("valueFrom"),
						"static pods may not reference API objects (configMapKeyRef, secretKeyRef)"))
				}
			}
			if len(c.EnvFrom) > 0 {
				errs = append(errs, field.Forbidden(path.Index(i).Child("envFrom"), "static pods may not reference API objects"))
			}
		}
	}
	check(pod.Spec.InitContainers, spec.Child("initContainers"))
	check(pod.Spec.Containers, spec.Child("containers"))
	return errs
}
