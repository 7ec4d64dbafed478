// Package atomicdir writes a set of files into a directory so that a
// reader (a container with the directory mounted) sees the whole old set
// or the whole new one, never a mix: the kubelet's atomic writer layout.
//
//	<dir>/..2026_11_24_10_00_00.123456789/<files>   the current set
//	<dir>/..data -> ..2026_11_24_10_00_00.123456789 swapped by rename(2)
//	<dir>/<top-level name> -> ..data/<top-level name>
//
// Applications that watch ..data (as kubelet-era tooling does) see one
// change per update.
package atomicdir

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

const (
	dataDir    = "..data"
	newDataDir = "..data_tmp"
	// MaxPath bounds a file's relative path, MaxElement one element of it
	// (the API server's limits for volume item paths).
	MaxPath    = 4096
	MaxElement = 255
)

// File is one file of the set.
type File struct {
	Data []byte
	Mode fs.FileMode // permission bits
}

// Owner is who the files belong to; -1 leaves a side as it is. A group
// also gets read access, as the kubelet applies a pod's fsGroup.
type Owner struct{ UID, GID int }

// NoOwner keeps the writer's own user and group.
var NoOwner = Owner{UID: -1, GID: -1}

// CheckPath refuses a relative path that could leave the directory or
// collide with the writer's own names.
func CheckPath(p string) error {
	switch {
	case p == "":
		return errors.New("must not be empty")
	case len(p) > MaxPath:
		return fmt.Errorf("is %d bytes long, more than %d", len(p), MaxPath)
	case path.IsAbs(p):
		return errors.New("must be relative")
	case strings.HasPrefix(p, ".."):
		return errors.New("must not start with '..'")
	}
	for _, el := range strings.Split(p, "/") {
		switch {
		case el == "..":
			return errors.New("must not contain '..'")
		case len(el) > MaxElement:
			return fmt.Errorf("has an element %d bytes long, more than %d", len(el), MaxElement)
		}
	}
	if path.Clean(p) != p {
		return errors.New("must be clean (no '.', '//' or trailing '/')")
	}
	return nil
}

// Write makes dir hold exactly files (relative paths, checked with
// CheckPath). It reports whether anything changed: an identical set
// leaves the directory alone. dir must exist. Write is not safe for
// concurrent use on the same dir.
func Write(dir string, files map[string]File, owner Owner) (bool, error) {
	for p := range files {
		if err := CheckPath(p); err != nil {
			return false, fmt.Errorf("file path %q %w", p, err)
		}
	}
	old, err := os.Readlink(filepath.Join(dir, dataDir))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, err
	}
	if old != "" && same(filepath.Join(dir, old), files, owner) {
		return false, linkTopLevel(dir, files)
	}
	stamp := time.Now().UTC().Format("..2006_01_02_15_04_05.")
	fresh, err := os.MkdirTemp(dir, stamp)
	if err != nil {
		return false, err
	}
	if err := writeAll(fresh, files, owner); err != nil {
		return false, errors.Join(err, os.RemoveAll(fresh))
	}
	tmp := filepath.Join(dir, newDataDir)
	os.Remove(tmp)
	if err := os.Symlink(filepath.Base(fresh), tmp); err != nil {
		return false, errors.Join(err, os.RemoveAll(fresh))
	}
	if err := os.Rename(tmp, filepath.Join(dir, dataDir)); err != nil {
		return false, errors.Join(err, os.Remove(tmp), os.RemoveAll(fresh))
	}
	// From here the new set is visible; what follows tidies up.
	if err := linkTopLevel(dir, files); err != nil {
		return true, err
	}
	return true, errors.Join(unlinkStale(dir, files), removeOld(dir))
}

// writeAll writes the files beneath root, made 0755 for the container's
// users to enter.
func writeAll(root string, files map[string]File, owner Owner) error {
	if err := os.Chmod(root, 0o755); err != nil {
		return err
	}
	if err := chown(root, owner, 0o555); err != nil {
		return err
	}
	for p, f := range files {
		full := filepath.Join(root, p)
		if parent := filepath.Dir(full); parent != root {
			if err := os.MkdirAll(parent, 0o755); err != nil {
				return err
			}
			for d := parent; d != root; d = filepath.Dir(d) {
				if err := chown(d, owner, 0o555); err != nil {
					return err
				}
			}
		}
		if err := os.WriteFile(full, f.Data, f.Mode.Perm()); err != nil {
			return err
		}
		// WriteFile's mode passes through the umask.
		if err := os.Chmod(full, f.Mode.Perm()); err != nil {
			return err
		}
		if err := chown(full, owner, 0o440); err != nil {
			return err
		}
	}
	return nil
}

// chown gives p to owner; with a group, it adds groupBits for the group.
func chown(p string, owner Owner, groupBits fs.FileMode) error {
	if owner.UID < 0 && owner.GID < 0 {
		return nil
	}
	if err := os.Lchown(p, owner.UID, owner.GID); err != nil {
		return err
	}
	if owner.GID < 0 {
		return nil
	}
	st, err := os.Stat(p)
	if err != nil {
		return err
	}
	return os.Chmod(p, st.Mode().Perm()|groupBits&0o070)
}

// same reports whether the set in dir is files, content and mode.
func same(dir string, files map[string]File, owner Owner) bool {
	n := 0
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		f, ok := files[rel]
		if !ok {
			return fs.ErrExist
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		want := f.Mode.Perm()
		if owner.GID >= 0 {
			want |= 0o040
		}
		if info.Mode().Perm() != want {
			return fs.ErrExist
		}
		got, err := os.ReadFile(p)
		if err != nil || !bytes.Equal(got, f.Data) {
			return fs.ErrExist
		}
		n++
		return nil
	})
	return err == nil && n == len(files)
}

// topLevel is the first element of each path: what dir shows as links.
func topLevel(files map[string]File) []string {
	var out []string
	for p := range files {
		first, _, _ := strings.Cut(p, "/")
		if !slices.Contains(out, first) {
			out = append(out, first)
		}
	}
	return out
}

func linkTopLevel(dir string, files map[string]File) error {
	for _, name := range topLevel(files) {
		link := filepath.Join(dir, name)
		want := filepath.Join(dataDir, name)
		if got, err := os.Readlink(link); err == nil && got == want {
			continue
		}
		// Something else by that name (not ours to keep): replace it.
		if err := os.RemoveAll(link); err != nil {
			return err
		}
		if err := os.Symlink(want, link); err != nil {
			return err
		}
	}
	return nil
}

// unlinkStale removes the links of top-level names the set no longer has.
func unlinkStale(dir string, files map[string]File) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	keep := topLevel(files)
	var errs []error
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "..") || slices.Contains(keep, e.Name()) || e.Type()&fs.ModeSymlink == 0 {
			continue
		}
		errs = append(errs, os.Remove(filepath.Join(dir, e.Name())))
	}
	return errors.Join(errs...)
}

// removeOld removes the previous set, and any left by a write that was
// cut off (a timestamped directory ..data does not point at).
func removeOld(dir string) error {
	current, err := os.Readlink(filepath.Join(dir, dataDir))
	if err != nil {
		return err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		name := e.Name()
		if name == current || name == dataDir || !e.IsDir() || !strings.HasPrefix(name, "..") {
			continue
		}
		errs = append(errs, os.RemoveAll(filepath.Join(dir, name)))
	}
	return errors.Join(errs...)
}
