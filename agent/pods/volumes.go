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

	"nodeagent/internal/sat"
)

// podVolumeDir is where a pod's emptyDir volumes live, in the kubelet's layout.
func (m *Manager) podVolumeDir(pod *corev1.Pod) string {
	return filepath.Join(m.opts.RootDir, "pods", string(pod.UID), "volumes")
}

// mounts resolves the container's volume mounts to host paths, creating
// emptyDir directories and DirectoryOrCreate host paths.
func (m *Manager) mounts(pod *corev1.Pod, c *corev1.Container) ([]*runtimeapi.Mount, error) {
	var out []*runtimeapi.Mount
	for _, vm := range c.VolumeMounts {
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
		if vm.SubPath != "" {
			host = filepath.Join(host, vm.SubPath)
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

// unmountVolumes detaches the tmpfs of every emptyDir under a pod's volume
// directory, so the directory can be removed.
func unmountVolumes(volumeDir string) error {
	dirs, _ := filepath.Glob(filepath.Join(volumeDir, "kubernetes.io~empty-dir", "*"))
	var errs []error
	for _, d := range dirs {
		if mounted, _ := isMountPoint(d); mounted {
			if err := unix.Unmount(d, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
				errs = append(errs, fmt.Errorf("unmount %s: %w", d, err))
			}
		}
	}
	return errors.Join(errs...)
}

// releaseVolumes tears down a pod's volume directory: tmpfs unmounted,
// emptyDirs removed.
func releaseVolumes(volumeDir string) error {
	if err := unmountVolumes(volumeDir); err != nil {
		return err
	}
	return os.RemoveAll(volumeDir)
}
