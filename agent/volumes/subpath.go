package volumes

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// A subPath is resolved and mounted the way the kubelet does it since
// CVE-2017-1002101: the container can write its volume, so any component
// of the subPath may be a symlink it planted (to "/", say) by the time the
// container restarts. The path is resolved by the kernel beneath the
// volume; the result stays open and is bind-mounted through /proc/self/fd
// onto a per-container target that only the agent can write. The runtime
// then mounts that target, which cannot be swapped.

// bindSubPath opens sub beneath volume (creating missing directories with
// the volume's mode, as the kubelet does) and bind-mounts it at target,
// replacing what an earlier start of the container bound there.
func bindSubPath(volume, sub, target string) error {
	fd, err := openBeneath(volume, sub)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if err := prepareTarget(target, st.Mode&unix.S_IFMT == unix.S_IFDIR); err != nil {
		return fmt.Errorf("subPath target %s: %w", target, err)
	}
	if err := unix.Mount(fmt.Sprintf("/proc/self/fd/%d", fd), target, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind subPath %q of %s at %s: %w", sub, volume, target, err)
	}
	return nil
}

// openBeneath opens sub inside dir with the kernel resolving every
// component beneath it (openat2 RESOLVE_BENEATH): a symlink that stays in
// the volume is followed, as the kubelet follows it; one that leads out
// (to "/", or by "..") is an error, and there is no window between the
// check and the open. Missing directories are created with the volume's
// mode. The fd is O_PATH: it can be mounted and stat-ed, not read. On
// kernels without openat2 (before 5.6) no symlink is followed at all.
func openBeneath(dir, sub string) (int, error) {
	for _, elem := range strings.Split(sub, "/") {
		if elem == ".." {
			return -1, fmt.Errorf("subPath %q: must not contain '..'", sub)
		}
	}
	root, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("open volume %s: %w", dir, err)
	}
	defer unix.Close(root)
	var volume unix.Stat_t
	if err := unix.Fstat(root, &volume); err != nil {
		return -1, err
	}
	perm := volume.Mode & 0o7777

	var elems []string
	for _, e := range strings.Split(sub, "/") {
		if e != "" && e != "." {
			elems = append(elems, e)
		}
	}
	// Create what is missing, one directory at a time, each inside the
	// resolved (beneath) parent.
	for i := range elems {
		prefix := strings.Join(elems[:i+1], "/")
		fd, err := resolveBeneath(root, prefix)
		if err == nil {
			unix.Close(fd)
			continue
		}
		if !errors.Is(err, unix.ENOENT) {
			return -1, subPathError(sub, prefix, err)
		}
		parent := root
		if i > 0 {
			if parent, err = resolveBeneath(root, strings.Join(elems[:i], "/")); err != nil {
				return -1, subPathError(sub, strings.Join(elems[:i], "/"), err)
			}
		}
		err = mkdirBeneath(parent, elems[i], perm)
		if parent != root {
			unix.Close(parent)
		}
		if err != nil {
			return -1, fmt.Errorf("subPath %q: create %s in the volume: %w", sub, prefix, err)
		}
	}
	if len(elems) == 0 {
		return unix.Dup(root)
	}
	fd, err := resolveBeneath(root, strings.Join(elems, "/"))
	if err != nil {
		return -1, subPathError(sub, strings.Join(elems, "/"), err)
	}
	return fd, nil
}

// resolveBeneath opens path below root, the kernel refusing any way out.
func resolveBeneath(root int, path string) (int, error) {
	fd, err := unix.Openat2(root, path, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS,
	})
	if errors.Is(err, unix.ENOSYS) {
		return walkNoSymlinks(root, path)
	}
	return fd, err
}

// walkNoSymlinks is the fallback without openat2: one component at a
// time with O_NOFOLLOW, so no symlink is followed, in the volume or out.
func walkNoSymlinks(root int, path string) (int, error) {
	cur, err := unix.Dup(root)
	if err != nil {
		return -1, err
	}
	for _, elem := range strings.Split(path, "/") {
		next, err := unix.Openat(cur, elem, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		unix.Close(cur)
		if err != nil {
			return -1, err
		}
		var st unix.Stat_t
		if err := unix.Fstat(next, &st); err != nil || st.Mode&unix.S_IFMT == unix.S_IFLNK {
			unix.Close(next)
			return -1, unix.ELOOP
		}
		cur = next
	}
	return cur, nil
}

func subPathError(sub, at string, err error) error {
	if errors.Is(err, unix.EXDEV) || errors.Is(err, unix.ELOOP) {
		return fmt.Errorf("subPath %q: %s leads out of the volume (through a symbolic link), which a subPath may not do", sub, at)
	}
	return fmt.Errorf("subPath %q: open %s in the volume: %w", sub, at, err)
}

// mkdirBeneath creates one directory with perm exactly (no umask).
func mkdirBeneath(dirfd int, name string, perm uint32) error {
	if err := unix.Mkdirat(dirfd, name, perm); err != nil && !errors.Is(err, unix.EEXIST) {
		return err
	}
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return unix.Fchmod(fd, perm)
}

// prepareTarget makes target an unmounted directory or empty file, as
// the source is one or the other.
func prepareTarget(target string, dir bool) error {
	for {
		if err := unix.Unmount(target, unix.MNT_DETACH); err != nil {
			break // EINVAL: not a mount point; ENOENT: not there yet
		}
	}
	if err := os.MkdirAll(filepath.Dir(target), 0o750); err != nil {
		return err
	}
	st, err := os.Lstat(target)
	switch {
	case err == nil && st.IsDir() == dir && (dir || st.Mode().IsRegular()):
		return nil
	case err == nil:
		if err := os.Remove(target); err != nil {
			return err
		}
	case !errors.Is(err, os.ErrNotExist):
		return err
	}
	if dir {
		return os.Mkdir(target, 0o750)
	}
	f, err := os.OpenFile(target, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o640)
	if err != nil {
		return err
	}
	return f.Close()
}
