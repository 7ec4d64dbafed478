package launch

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// sysctlSnapshot is kernel settings as they were, to put back after a
// peer that writes them.
type sysctlSnapshot map[string]string

func takeSysctls(keys []string) sysctlSnapshot {
	s := sysctlSnapshot{}
	for _, k := range keys {
		if b, err := os.ReadFile(filepath.Join("/proc/sys", k)); err == nil {
			s[k] = strings.TrimSpace(string(b))
		}
	}
	return s
}

// restore writes back every setting that changed.
func (s sysctlSnapshot) restore() error {
	var errs []error
	for k, was := range s {
		p := filepath.Join("/proc/sys", k)
		b, err := os.ReadFile(p)
		if err == nil && strings.TrimSpace(string(b)) == was {
			continue
		}
		if err := os.WriteFile(p, []byte(was), 0o644); err != nil {
			errs = append(errs, fmt.Errorf("restoring %s to %s: %w", strings.ReplaceAll(k, "/", "."), was, err))
		}
	}
	return errors.Join(errs...)
}

// pathSnapshot is whether each path existed, and its mode: a peer's paths
// outside its own directories are removed after it if they were not
// there, and get their mode back if they were.
type pathSnapshot map[string]pathState

type pathState struct {
	existed bool
	mode    os.FileMode
}

func takePaths(paths []string) pathSnapshot {
	s := pathSnapshot{}
	for _, p := range paths {
		st, err := os.Lstat(p)
		s[p] = pathState{existed: err == nil}
		if err == nil {
			s[p] = pathState{true, st.Mode()}
		}
	}
	return s
}

// restore removes what was not there, deepest first, and resets modes.
func (s pathSnapshot) restore() error {
	paths := make([]string, 0, len(s))
	for p := range s {
		paths = append(paths, p)
	}
	sort.Sort(sort.Reverse(sort.StringSlice(paths)))
	var errs []error
	for _, p := range paths {
		was := s[p]
		st, err := os.Lstat(p)
		if err != nil {
			continue
		}
		switch {
		case !was.existed:
			// Only what is empty now (a directory) or a file: never a
			// tree someone else filled meanwhile.
			if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, fmt.Errorf("removing %s: %w", p, err))
			}
		case st.Mode() != was.mode && st.Mode().Type() == was.mode.Type():
			if err := os.Chmod(p, was.mode.Perm()); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}
