//go:build integration

package mounts

import (
	"os"
	"path/filepath"
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
