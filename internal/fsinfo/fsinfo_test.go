package fsinfo

import (
	"errors"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

func TestStatReadsTheFilesystem(t *testing.T) {
	dir := t.TempDir()
	u, err := Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	if u.Capacity != st.Blocks*uint64(st.Bsize) || u.Inodes != st.Files {
		t.Errorf("Stat = %+v; statfs blocks %d of %d bytes, %d inodes", u, st.Blocks, st.Bsize, st.Files)
	}
	if u.Capacity == 0 || u.Available > u.Capacity || u.Used > u.Capacity || u.InodesFree > u.Inodes {
		t.Errorf("inconsistent usage %+v", u)
	}
	if _, err := Stat(dir + "/missing"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Stat of a missing path = %v, want ErrNotExist", err)
	}
}
