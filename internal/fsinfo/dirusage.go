package fsinfo

import (
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// MaxDepth bounds the directory walk: each level holds a file descriptor.
// A tree deeper than this is not measured (DirUsage returns an error).
const MaxDepth = 1024

// DirUsage is what a directory tree takes on disk: allocated bytes and
// inodes, hard links counted once by (device, inode), remembering only
// files with more than one link. A pod writes the
// trees it is asked about, so the walk is done by file descriptor
// (openat/fstatat relative to each directory, never following a symlink):
// a chain longer than PATH_MAX is measured like any other, and a
// directory swapped for a symlink is not followed. A missing directory
// takes nothing.
func DirUsage(dir string) (bytes, inodes int64, err error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, fmt.Errorf("measure %s: %w", dir, err)
	}
	w := walker{seen: map[fileID]struct{}{}}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return 0, 0, fmt.Errorf("measure %s: %w", dir, err)
	}
	w.count(&st) // a directory: never remembered
	if err := w.walk(os.NewFile(uintptr(fd), dir), 1); err != nil {
		return 0, 0, fmt.Errorf("measure %s: %w", dir, err)
	}
	return w.bytes, w.inodes, nil
}

type fileID struct{ dev, ino uint64 }

type walker struct {
	bytes, inodes int64
	seen          map[fileID]struct{}
}

// MaxLinked bounds the files with more than one link a walk remembers
// (about 50 bytes each); a tree with more is not measured.
const MaxLinked = 1 << 17

// count adds a file once. Only a file with more than one link can be met
// again, so only those are remembered: a tree of a million files costs
// the walk no memory per file, and one of linked files at most MaxLinked.
func (w *walker) count(st *unix.Stat_t) error {
	if st.Nlink > 1 && st.Mode&unix.S_IFMT != unix.S_IFDIR {
		id := fileID{uint64(st.Dev), st.Ino}
		if _, ok := w.seen[id]; ok {
			return nil
		}
		if len(w.seen) >= MaxLinked {
			return fmt.Errorf("more than %d files with several links", MaxLinked)
		}
		w.seen[id] = struct{}{}
	}
	w.bytes += st.Blocks * 512
	w.inodes++
	return nil
}

// walk counts what dir holds; it closes dir.
func (w *walker) walk(dir *os.File, depth int) error {
	defer dir.Close()
	if depth > MaxDepth {
		return fmt.Errorf("deeper than %d directories", MaxDepth)
	}
	dirfd := int(dir.Fd())
	for {
		entries, err := dir.ReadDir(1024)
		for _, e := range entries {
			var st unix.Stat_t
			if err := unix.Fstatat(dirfd, e.Name(), &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
				if errors.Is(err, unix.ENOENT) {
					continue // removed meanwhile
				}
				return err
			}
			if err := w.count(&st); err != nil {
				return err
			}
			if st.Mode&unix.S_IFMT != unix.S_IFDIR {
				continue
			}
			sub, err := unix.Openat(dirfd, e.Name(), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if errors.Is(err, unix.ENOENT) {
				continue
			}
			if err != nil {
				return err
			}
			if err := w.walk(os.NewFile(uintptr(sub), e.Name()), depth+1); err != nil {
				return err
			}
		}
		if errors.Is(err, io.EOF) || (err == nil && len(entries) == 0) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}
