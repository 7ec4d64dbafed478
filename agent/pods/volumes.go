package pods

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"

	"nodeagent/internal/layout"
	"nodeagent/internal/mounts"
	"nodeagent/internal/sat"
)

// mountTmpfs mounts a tmpfs at dir (sized by sizeLimit when set) unless
// one is already there: a medium: Memory emptyDir.
func mountTmpfs(dir string, sizeLimit *resource.Quantity) error {
	var size int64
	if sizeLimit != nil {
		size = sat.Value(*sizeLimit)
	}
	return mountSizedTmpfs(dir, size)
}

// mountSizedTmpfs mounts a tmpfs of at most size bytes (0: the kernel's
// default, half the RAM) at dir unless one is already there.
func mountSizedTmpfs(dir string, size int64) error {
	if mounted, err := isMountPoint(dir); err != nil || mounted {
		return err
	}
	opts := "mode=1777"
	if size > 0 {
		opts += fmt.Sprintf(",size=%d", size)
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
func releaseVolumes(root layout.Root, uid types.UID) error {
	if err := mounts.UnmountUnder(root.Pod(uid)); err != nil {
		return err
	}
	return errors.Join(os.RemoveAll(root.Volumes(uid)), os.RemoveAll(root.SubPaths(uid)))
}
