//go:build integration

package mounts

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestLiveRemoveAllKeepsWhatABindShows: a bind mount below the removed
// directory is detached first, so the directory it shows is left whole.
func TestLiveRemoveAllKeepsWhatABindShows(t *testing.T) {
	outside := t.TempDir()
	keep := filepath.Join(outside, "keep")
	if err := os.WriteFile(keep, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bind := filepath.Join(dir, "a", "bind")
	tmpfs := filepath.Join(dir, "b")
	for _, d := range []string{bind, tmpfs} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := unix.Mount(outside, bind, "", unix.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", tmpfs, "tmpfs", 0, ""); err != nil {
		unix.Unmount(bind, unix.MNT_DETACH)
		t.Fatal(err)
	}
	if err := RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(keep); err != nil {
		t.Errorf("a file behind the bind mount was removed: %v", err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("dir still there: %v", err)
	}
	if left, _ := Under(dir); len(left) != 0 {
		t.Errorf("mounts left: %v", left)
	}
}

// TestLiveMakeRSharedBindsOnceAndPropagates: a directory on a private
// mount becomes a shared bind of itself, a second call adds nothing, a
// mount made below reaches a slave bind of it, and UnmountTree leaves
// nothing mounted.
func TestLiveMakeRSharedBindsOnceAndPropagates(t *testing.T) {
	base := t.TempDir()
	// A private tmpfs stands for a host whose root is not shared.
	if err := unix.Mount("tmpfs", base, "tmpfs", 0, ""); err != nil {
		t.Fatal(err)
	}
	defer unix.Unmount(base, unix.MNT_DETACH)
	if err := unix.Mount("", base, "", unix.MS_PRIVATE, ""); err != nil {
		t.Fatal(err)
	}
	root, view := filepath.Join(base, "root"), filepath.Join(base, "view")
	for _, d := range []string{root, view} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 2; i++ {
		if err := MakeRShared(root); err != nil {
			t.Fatal(err)
		}
	}
	if n := countMounts(t, root); n != 1 {
		t.Errorf("%s is mounted %d times after two calls, want 1", root, n)
	}
	// view sees root as a container's HostToContainer volume would.
	if err := unix.Mount(root, view, "", unix.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	defer unix.Unmount(view, unix.MNT_DETACH)
	if err := unix.Mount("", view, "", unix.MS_SLAVE, ""); err != nil {
		t.Fatal(err)
	}
	below := filepath.Join(root, "pods", "vol")
	if err := os.MkdirAll(below, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", below, "tmpfs", 0, ""); err != nil {
		t.Fatal(err)
	}
	if n := countMounts(t, filepath.Join(view, "pods", "vol")); n != 1 {
		t.Errorf("a mount below the shared root did not reach the slave view (%d mounts there)", n)
	}
	if err := UnmountTree(root); err != nil {
		t.Fatal(err)
	}
	if n := countMounts(t, root) + countMounts(t, below); n != 0 {
		t.Errorf("%d mounts left at %s after UnmountTree", n, root)
	}
}

func countMounts(t *testing.T, mp string) int {
	t.Helper()
	data, err := os.ReadFile(mountinfo)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) > 4 && unescape(f[4]) == mp {
			n++
		}
	}
	return n
}
