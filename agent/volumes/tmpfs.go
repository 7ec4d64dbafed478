package volumes

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"nodeagent/internal/mounts"
)

// mountTmpfs mounts a tmpfs of at most size bytes (0: the kernel's
// default, half the RAM) at dir unless one is already there. It is
// noswap where the kernel knows the option (6.4 and later), as the
// kubelet mounts memory-backed volumes: secrets never reach swap.
func mountTmpfs(dir string, size int64) error {
	if mounted, err := isMountPoint(dir); err != nil || mounted {
		return err
	}
	opts := "mode=1777"
	if size > 0 {
		opts += fmt.Sprintf(",size=%d", size)
	}
	err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts+",noswap")
	if errors.Is(err, unix.EINVAL) { // an older kernel
		err = unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts)
	}
	if err != nil {
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

// removeVolumeDir removes a volume's directory: the mounts below it, its
// own tmpfs, then its files.
func removeVolumeDir(dir string) error {
	if err := mounts.UnmountUnder(dir); err != nil {
		return err
	}
	mounted, err := isMountPoint(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if mounted {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("unmount %s: %w", dir, err)
		}
	}
	return os.RemoveAll(dir)
}
