package volumes

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"nodeagent/internal/layout"
)

// imagePlugin serves image volumes (GA 1.36): nothing is made on the
// node. The pod worker pulls the image with the pod's pull secrets and
// the volume's pull policy, and the runtime mounts it, read-only, from
// its own store (the CRI's Mount.image).
type imagePlugin struct{}

func (imagePlugin) Name() string                                            { return layout.PluginImage }
func (imagePlugin) Handles(v *corev1.Volume) bool                           { return v.Image != nil }
func (imagePlugin) Live() bool                                              { return false }
func (imagePlugin) TearDown(string) error                                   { return nil }
func (imagePlugin) Check(*corev1.Volume, *field.Path, bool) field.ErrorList { return nil }
func (imagePlugin) UsageDir(layout.Root, types.UID, *corev1.Volume) string  { return "" }
func (imagePlugin) SetUp(context.Context, *Manager, *corev1.Pod, *corev1.Volume) (Mounted, error) {
	return Mounted{ReadOnly: true}, nil
}
