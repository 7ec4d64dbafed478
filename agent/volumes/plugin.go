package volumes

import (
	"context"
	"reflect"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"nodeagent/internal/layout"
)

// Plugin sets up and tears down the volumes of one type, as a kubelet
// volume plugin does. A new volume type is a new Plugin and its line in
// plugins.
type Plugin interface {
	// Name is the kubelet's name for the plugin; the volumes it keeps
	// under a pod's directory live in a directory of that name.
	Name() string
	// Handles reports whether v is of the plugin's type.
	Handles(v *corev1.Volume) bool
	// Check lists what in v, at p, the agent cannot honour; a static pod
	// (static) may not reference API objects.
	Check(v *corev1.Volume, p *field.Path, static bool) field.ErrorList
	// SetUp makes v ready for the pod's containers to mount. On error, a
	// Mounted with a Path is content set up earlier that still serves.
	SetUp(ctx context.Context, m *Manager, pod *corev1.Pod, v *corev1.Volume) (Mounted, error)
	// TearDown undoes SetUp once no container of the pod runs.
	TearDown(path string) error
	// UsageDir is the directory whose files count as the volume's use of
	// the node's filesystem ("": none there).
	UsageDir(root layout.Root, uid types.UID, v *corev1.Volume) string
	// Live: SetUp runs at every sync of the pod, keeping the content
	// current; otherwise once.
	Live() bool
}

// Mounted is a volume set up for the pod's containers.
type Mounted struct {
	Path string
	// ReadOnly: containers mount it read-only whatever their mount says.
	ReadOnly bool
	// Refresh is when SetUp must run again (a token due for rotation);
	// 0: when something it reads changes.
	Refresh time.Duration
}

// plugins are the volume types the agent supports.
var plugins = []Plugin{
	emptyDirPlugin{},
	hostPathPlugin{},
	configMapPlugin,
	secretPlugin,
	downwardAPIPlugin,
	projectedPlugin,
	imagePlugin{},
}

// pluginFor is v's plugin, nil when no plugin handles v.
func pluginFor(v *corev1.Volume) Plugin {
	for _, p := range plugins {
		if p.Handles(v) {
			return p
		}
	}
	return nil
}

// Check lists what in the pod's volumes the agent cannot honour: types it
// has no plugin for, and what each plugin refuses.
func Check(pod *corev1.Pod, static bool) field.ErrorList {
	var errs field.ErrorList
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		p := field.NewPath("spec", "volumes").Index(i)
		plugin := pluginFor(v)
		if plugin == nil {
			kind := sourceName(reflect.ValueOf(v.VolumeSource))
			errs = append(errs, field.Forbidden(p.Child(kind), kind+" volumes are not supported by nodeagent: only emptyDir, hostPath, configMap, secret, downwardAPI, projected and image volumes are"))
			continue
		}
		errs = append(errs, plugin.Check(v, p, static)...)
	}
	return errs
}

// UsageDirs are the directories whose files count as the pod's volumes'
// use of the node's filesystem.
func UsageDirs(root string, pod *corev1.Pod) []string {
	var dirs []string
	for i := range pod.Spec.Volumes {
		if dir := UsageDir(root, pod.UID, &pod.Spec.Volumes[i]); dir != "" {
			dirs = append(dirs, dir)
		}
	}
	return dirs
}

// UsageDir is the directory whose files count as volume v's use of the
// node's filesystem ("": none there).
func UsageDir(root string, uid types.UID, v *corev1.Volume) string {
	if p := pluginFor(v); p != nil {
		return p.UsageDir(layout.Root(root), uid, v)
	}
	return ""
}

// apiReference is the error for a static pod's reference to an API
// object (the kubelet's PreventStaticPodAPIReferences: a static pod must
// run without an API server).
func apiReference(p *field.Path, what string, static bool) field.ErrorList {
	if !static {
		return nil
	}
	return field.ErrorList{field.Forbidden(p, "static pods may not reference API objects ("+what+")")}
}

// sourceName is the JSON name of the one source set in a VolumeSource or
// VolumeProjection (they are all pointers), for the refusal's field path.
func sourceName(v reflect.Value) string {
	for i := range v.NumField() {
		if f := v.Field(i); f.Kind() == reflect.Pointer && !f.IsNil() {
			name, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("json"), ",")
			return name
		}
	}
	return "unknown"
}
