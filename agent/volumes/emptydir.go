package volumes

import (
	"context"
	"fmt"
	"os"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"nodeagent/internal/atomicdir"
	"nodeagent/internal/layout"
	"nodeagent/internal/sat"
)

// emptyDirPlugin makes a directory under the pod's, on a tmpfs for medium
// Memory (sized by sizeLimit when set).
type emptyDirPlugin struct{}

func (emptyDirPlugin) Name() string                  { return layout.PluginEmptyDir }
func (emptyDirPlugin) Handles(v *corev1.Volume) bool { return v.EmptyDir != nil }
func (emptyDirPlugin) Live() bool                    { return false }

func (emptyDirPlugin) Check(v *corev1.Volume, p *field.Path, _ bool) field.ErrorList {
	if m := v.EmptyDir.Medium; m != corev1.StorageMediumDefault && m != corev1.StorageMediumMemory {
		return field.ErrorList{field.NotSupported(p.Child("emptyDir", "medium"), m, []string{"", "Memory"})}
	}
	return nil
}

func (emptyDirPlugin) SetUp(_ context.Context, m *Manager, pod *corev1.Pod, v *corev1.Volume) (Mounted, error) {
	dir := layout.Root(m.root).EmptyDir(pod.UID, v.Name)
	// 0777 whatever the umask, as the kubelet: any user the containers
	// run as may write there.
	if err := mkdirMode(dir, 0o777); err != nil {
		return Mounted{}, err
	}
	if v.EmptyDir.Medium == corev1.StorageMediumMemory {
		var size int64
		if v.EmptyDir.SizeLimit != nil {
			size = sat.Value(*v.EmptyDir.SizeLimit)
		}
		if err := m.tmpfs(dir, size); err != nil {
			return Mounted{}, err
		}
	}
	// fsGroup owns the volume, with set-group-ID so what the containers
	// create there is the group's too (the kubelet's SetVolumeOwnership).
	if o := owner(pod); o != atomicdir.NoOwner {
		if err := os.Chown(dir, -1, o.GID); err != nil {
			return Mounted{}, fmt.Errorf("give emptyDir %s to fsGroup %d: %w", v.Name, o.GID, err)
		}
		// Added to the mode there (a tmpfs root keeps its sticky bit).
		st, err := os.Stat(dir)
		if err != nil {
			return Mounted{}, err
		}
		if err := os.Chmod(dir, st.Mode()|0o770|os.ModeSetgid); err != nil {
			return Mounted{}, err
		}
	}
	return Mounted{Path: dir}, nil
}

func (emptyDirPlugin) TearDown(path string) error { return removeVolumeDir(path) }

// UsageDir is a disk emptyDir's directory; a memory one is charged to the
// pod's memory instead.
func (emptyDirPlugin) UsageDir(root layout.Root, uid types.UID, v *corev1.Volume) string {
	if v.EmptyDir.Medium == corev1.StorageMediumMemory {
		return ""
	}
	return root.EmptyDir(uid, v.Name)
}
