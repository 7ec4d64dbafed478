package manifest

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// validateImageVolume is the API server's check of an image volume: a
// reference (its syntax is the runtime's business, as for a container's
// image) and a known pull policy.
func validateImageVolume(img *corev1.ImageVolumeSource, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if strings.TrimSpace(img.Reference) == "" {
		errs = append(errs, field.Required(p.Child("reference"), ""))
	}
	switch img.PullPolicy {
	case corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever:
	default:
		errs = append(errs, field.NotSupported(p.Child("pullPolicy"), img.PullPolicy, []string{"Always", "IfNotPresent", "Never"}))
	}
	return errs
}
