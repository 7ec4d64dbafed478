package pods

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"nodeagent/agent/source"
	"nodeagent/internal/expand"
	"nodeagent/internal/mounts"
	"nodeagent/internal/sat"
)

// podVolumeDir is where a pod's emptyDir volumes live, in the kubelet's layout.
func (m *Manager) podVolumeDir(pod *corev1.Pod) string {
	return filepath.Join(m.opts.RootDir, "pods", string(pod.UID), "volumes")
}

// mounts resolves the container's volume mounts to host paths, creating
// emptyDir directories and DirectoryOrCreate host paths. A subPath (or a
// subPathExpr, expanded with the container's environment) is resolved
// beneath its volume (a symlink leading out is an error) and bound at a
// per-container target (bindSubPath).
func (m *Manager) mounts(pod *corev1.Pod, c *corev1.Container, env func(string) (string, bool)) ([]*runtimeapi.Mount, error) {
	var out []*runtimeapi.Mount
	for i, vm := range c.VolumeMounts {
		var host string
		for _, v := range pod.Spec.Volumes {
			if v.Name != vm.Name {
				continue
			}
			switch {
			case v.EmptyDir != nil:
				host = filepath.Join(m.podVolumeDir(pod), "kubernetes.io~empty-dir", v.Name)
				if err := os.MkdirAll(host, 0o777); err != nil {
					return nil, fmt.Errorf("volume %s: %w", v.Name, err)
				}
				if v.EmptyDir.Medium == corev1.StorageMediumMemory {
					if err := mountTmpfs(host, v.EmptyDir.SizeLimit); err != nil {
						return nil, fmt.Errorf("volume %s: %w", v.Name, err)
					}
				}
			case v.HostPath != nil:
				host = v.HostPath.Path
				if t := v.HostPath.Type; t != nil && *t == corev1.HostPathDirectoryOrCreate {
					if err := os.MkdirAll(host, 0o755); err != nil {
						return nil, fmt.Errorf("volume %s: %w", v.Name, err)
					}
				}
			}
		}
		if host == "" {
			return nil, fmt.Errorf("volume %s not found", vm.Name)
		}
		sub := vm.SubPath
		if vm.SubPathExpr != "" {
			sub = expand.Vars(vm.SubPathExpr, env)
			if err := source.CheckSubPath(sub); err != nil {
				return nil, fmt.Errorf("volumeMounts[%d].subPathExpr %q expands to %q, which %w", i, vm.SubPathExpr, sub, err)
			}
		}
		if sub != "" {
			target := m.subPathTarget(string(pod.UID), vm.Name, c.Name, i)
			if err := bindSubPath(host, sub, target); err != nil {
				return nil, fmt.Errorf("volume %s: %w", vm.Name, err)
			}
			host = target
		}
		out = append(out, &runtimeapi.Mount{ContainerPath: vm.MountPath, HostPath: host, Readonly: vm.ReadOnly})
	}
	return out, nil
}

// mountTmpfs mounts a tmpfs at dir (sized by sizeLimit when set) unless
// one is already there: a medium: Memory emptyDir.
func mountTmpfs(dir string, sizeLimit *resource.Quantity) error {
	if mounted, err := isMountPoint(dir); err != nil || mounted {
		return err
	}
	opts := "mode=1777"
	if sizeLimit != nil && sat.Value(*sizeLimit) > 0 {
		opts += fmt.Sprintf(",size=%d", sat.Value(*sizeLimit))
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		return fmt.Errorf("mount tmpfs on %s: %w", dir, err)
	}
	return nil
}

// isMountPoint reports whether dir is on another device than its parent.
func isMountPoint(dir string) (bool, error) {
	var st, parent unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return false, err
	}
	if err := unix.Stat(filepath.Dir(dir), &parent); err != nil {
		return false, err
	}
	return st.Dev != parent.Dev, nil
}

// releaseVolumes tears down a finished pod's volumes: every mount under
// the pod's directory (tmpfs emptyDirs, subPath binds) is detached first,
// then the emptyDirs and subPath targets are removed.
func releaseVolumes(podDir string) error {
	if err := mounts.UnmountUnder(podDir); err != nil {
		return err
	}
	return errors.Join(os.RemoveAll(filepath.Join(podDir, "volumes")), os.RemoveAll(filepath.Join(podDir, "volume-subpaths")))
}
