package volumes

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"nodeagent/internal/layout"
)

// downwardAPIPlugin writes the pod's own fields as files.
var downwardAPIPlugin = contentPlugin{
	name:    layout.PluginDownwardAPI,
	handles: func(v *corev1.Volume) bool { return v.DownwardAPI != nil },
	check:   func(*corev1.Volume, *field.Path, bool) field.ErrorList { return nil },
	resolve: func(_ context.Context, m *Manager, pod *corev1.Pod, v *corev1.Volume, c *content) error {
		return m.downwardAPI(pod, c, v.DownwardAPI.Items, mode(v.DownwardAPI.DefaultMode))
	},
}
