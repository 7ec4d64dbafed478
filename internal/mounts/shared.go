package mounts

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// MakeRShared puts dir on a shared mount, as the kubelet does with its
// root directory at start: the runtime refuses a Bidirectional volume
// whose source is not on a shared mount, and mounts made under dir reach
// the containers that see it with HostToContainer. A dir already on a
// shared mount is left alone; otherwise dir is bind-mounted onto itself
// and the bind made rshared. The bind outlives the agent, since pods keep
// their volumes mounted under it; a second start finds it shared.
func MakeRShared(dir string) error {
	dir, err := resolve(dir)
	if err != nil {
		return err
	}
	shared, _, err := mountOf(dir)
	if err != nil || shared {
		return err
	}
	if err := unix.Mount(dir, dir, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind-mount %s onto itself: %w", dir, err)
	}
	if err := unix.Mount("", dir, "", unix.MS_SHARED|unix.MS_REC, ""); err != nil {
		unix.Unmount(dir, unix.MNT_DETACH)
		return fmt.Errorf("make %s rshared: %w", dir, err)
	}
	return nil
}

// OnSharedMount tells whether the mount holding dir is shared: what
// MakeRShared makes sure of.
func OnSharedMount(dir string) (bool, error) {
	dir, err := resolve(dir)
	if err != nil {
		return false, err
	}
	shared, _, err := mountOf(dir)
	return shared, err
}

// resolve makes dir absolute and follows its symlinks, as mountinfo
// names mount points.
func resolve(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	return filepath.EvalSymlinks(abs)
}

// mountOf reads mountinfo for the mount holding dir: whether it is
// shared, and its mount point.
func mountOf(dir string) (shared bool, point string, err error) {
	f, err := os.Open(mountinfo)
	if err != nil {
		return false, "", err
	}
	defer f.Close()
	return holdingMount(f, dir)
}

// holdingMount finds the mount dir lies on (the one mounted last on the
// longest mount point containing dir): whether its propagation is shared,
// and its mount point.
func holdingMount(r io.Reader, dir string) (bool, string, error) {
	best, shared := "", false
	err := eachMount(r, func(mp string, optional []string) {
		if !contains(mp, dir) || len(mp) < len(best) {
			return
		}
		best, shared = mp, slices.ContainsFunc(optional, func(o string) bool { return strings.HasPrefix(o, "shared:") })
	})
	if err != nil {
		return false, "", err
	}
	if best == "" {
		return false, "", fmt.Errorf("no mount holds %s in %s", dir, mountinfo)
	}
	return shared, best, nil
}

// contains tells whether mount point mp holds path.
func contains(mp, path string) bool {
	return mp == "/" || mp == path || strings.HasPrefix(path, mp+"/")
}

// UnmountTree detaches every mount below dir, then the bind MakeRShared
// left on dir itself, if there is one: for tests and tools that remove a
// root directory they gave an agent.
func UnmountTree(dir string) error {
	dir, err := resolve(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return err
	}
	if err := UnmountUnder(dir); err != nil {
		return err
	}
	if shared, point, err := mountOf(dir); err != nil || !shared || point != dir {
		return err
	}
	if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("unmount %s: %w", dir, err)
	}
	return nil
}
