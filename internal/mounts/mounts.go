// Package mounts finds and removes the mounts the agent made under a
// directory (tmpfs emptyDirs, subPath binds) before the directory is
// removed: os.RemoveAll does not stop at a mount point, and would empty
// whatever a bind mount shows.
package mounts

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// mountinfo is read from here; a variable for tests.
var mountinfo = "/proc/self/mountinfo"

// Under lists the mount points strictly below dir, deepest first, from
// /proc/self/mountinfo.
func Under(dir string) ([]string, error) {
	f, err := os.Open(mountinfo)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return under(f, filepath.Clean(dir))
}

func under(r io.Reader, dir string) ([]string, error) {
	prefix := dir + "/"
	seen := map[string]bool{}
	var out []string
	err := eachMount(r, func(mp string, _ []string) {
		if strings.HasPrefix(mp, prefix) && !seen[mp] {
			seen[mp] = true
			out = append(out, mp)
		}
	})
	if err != nil {
		return nil, err
	}
	sort.Slice(out, func(i, j int) bool {
		if di, dj := strings.Count(out[i], "/"), strings.Count(out[j], "/"); di != dj {
			return di > dj
		}
		return out[i] > out[j]
	})
	return out, nil
}

// eachMount calls f with each mountinfo line's mount point (unescaped)
// and its optional fields (shared:N, master:N, ...), in file order.
func eachMount(r io.Reader, f func(point string, optional []string)) error {
	s := bufio.NewScanner(r)
	s.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for s.Scan() {
		// id parent major:minor root mountpoint options [optional...] - type source super
		fields := strings.Fields(s.Text())
		if len(fields) < 6 {
			continue
		}
		optional := fields[6:]
		for i, opt := range optional {
			if opt == "-" {
				optional = optional[:i]
				break
			}
		}
		f(unescape(fields[4]), optional)
	}
	if err := s.Err(); err != nil {
		return fmt.Errorf("read mountinfo: %w", err)
	}
	return nil
}

// unescape undoes mountinfo's octal escapes (\040 for a space).
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// UnmountUnder detaches every mount below dir, deepest first. A mount that
// went meanwhile is not an error.
func UnmountUnder(dir string) error {
	points, err := Under(dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, p := range points {
		if err := unix.Unmount(p, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("unmount %s: %w", p, err))
		}
	}
	return errors.Join(errs...)
}

// RemoveAll removes dir after detaching the mounts below it.
func RemoveAll(dir string) error {
	if err := UnmountUnder(dir); err != nil {
		return err
	}
	return os.RemoveAll(dir)
}
