package volumes

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"nodeagent/internal/layout"
)

// configMapPlugin writes a configMap's keys as files.
var configMapPlugin = contentPlugin{
	name:    layout.PluginConfigMap,
	handles: func(v *corev1.Volume) bool { return v.ConfigMap != nil },
	check: func(v *corev1.Volume, p *field.Path, static bool) field.ErrorList {
		return apiReference(p.Child("configMap"), "configMap", static)
	},
	resolve: func(ctx context.Context, m *Manager, pod *corev1.Pod, v *corev1.Volume, c *content) error {
		s := v.ConfigMap
		return m.object(ctx, pod, c, "configmap", s.Name, s.Items, mode(s.DefaultMode), s.Optional)
	},
}
