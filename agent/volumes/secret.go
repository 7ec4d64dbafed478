package volumes

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"nodeagent/internal/layout"
)

// secretPlugin writes a secret's keys as files, on a tmpfs.
var secretPlugin = contentPlugin{
	name:    layout.PluginSecret,
	onTmpfs: true,
	handles: func(v *corev1.Volume) bool { return v.Secret != nil },
	check: func(v *corev1.Volume, p *field.Path, static bool) field.ErrorList {
		return apiReference(p.Child("secret"), "secret", static)
	},
	resolve: func(ctx context.Context, m *Manager, pod *corev1.Pod, v *corev1.Volume, c *content) error {
		s := v.Secret
		return m.object(ctx, pod, c, "secret", s.SecretName, s.Items, mode(s.DefaultMode), s.Optional)
	},
}
