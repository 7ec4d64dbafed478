package fsinfo

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestDirUsageCountsHardLinksOnceAndSkipsSymlinks(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "f"), make([]byte, 64<<10), 0o644)
	os.Link(filepath.Join(dir, "f"), filepath.Join(dir, "hard"))
	os.Symlink("/usr", filepath.Join(dir, "link")) // counted as a link, not followed
	os.Mkdir(filepath.Join(dir, "d"), 0o755)
	bytes, inodes, err := DirUsage(dir)
	if err != nil {
		t.Fatal(err)
	}
	// dir, f (once), link, d
	if inodes != 4 {
		t.Errorf("inodes %d, want 4", inodes)
	}
	if bytes < 64<<10 || bytes > 1<<20 {
		t.Errorf("bytes %d: want the 64 KiB file once (and not /usr)", bytes)
	}
	if b, i, err := DirUsage(filepath.Join(dir, "missing")); b != 0 || i != 0 || err != nil {
		t.Errorf("missing dir: %d %d %v", b, i, err)
	}
}

// A pod can build a directory chain longer than PATH_MAX (4096 bytes):
// the path-based walk failed on it and the emptyDir's sizeLimit was never
// enforced. The walk by file descriptor measures it.
func TestDirUsageMeasuresChainsLongerThanPathMax(t *testing.T) {
	root := t.TempDir()
	fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	name := strings.Repeat("d", 200)
	const levels = 40 // 40 * 201 bytes: twice PATH_MAX
	for i := 0; i < levels; i++ {
		if err := unix.Mkdirat(fd, name, 0o755); err != nil {
			t.Fatal(err)
		}
		next, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		unix.Close(fd)
		if err != nil {
			t.Fatal(err)
		}
		fd = next
	}
	fileFd, err := unix.Openat(fd, "data", unix.O_CREAT|unix.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	unix.Write(fileFd, make([]byte, 1<<20))
	unix.Fsync(fileFd)
	unix.Close(fileFd)
	unix.Close(fd)
	t.Cleanup(func() { removeDeep(root, name, levels) })

	bytes, inodes, err := DirUsage(root)
	if err != nil {
		t.Fatalf("a chain longer than PATH_MAX: %v", err)
	}
	if inodes != levels+2 || bytes < 1<<20 {
		t.Errorf("inodes %d bytes %d: want %d inodes and the 1 MiB file", inodes, bytes, levels+2)
	}
}

func TestDirUsageRefusesTreesDeeperThanItWalks(t *testing.T) {
	root := t.TempDir()
	fd, _ := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	for i := 0; i < MaxDepth+1; i++ {
		unix.Mkdirat(fd, "d", 0o755)
		next, err := unix.Openat(fd, "d", unix.O_RDONLY|unix.O_DIRECTORY, 0)
		unix.Close(fd)
		if err != nil {
			t.Fatal(err)
		}
		fd = next
	}
	unix.Close(fd)
	t.Cleanup(func() { removeDeep(root, "d", MaxDepth+1) })
	if _, _, err := DirUsage(root); err == nil || !strings.Contains(err.Error(), "deeper than 1024 directories") {
		t.Errorf("got %v", err)
	}
}

// removeDeep removes a chain of dirs named name under root bottom-up by
// file descriptor (os.RemoveAll copes, but not on every Go version).
func removeDeep(root, name string, levels int) {
	fds := []int{}
	fd, _ := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	fds = append(fds, fd)
	for i := 0; i < levels; i++ {
		next, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		if err != nil {
			break
		}
		fd = next
		fds = append(fds, fd)
	}
	unix.Unlinkat(fds[len(fds)-1], "data", 0)
	for i := len(fds) - 1; i > 0; i-- {
		unix.Close(fds[i])
		unix.Unlinkat(fds[i-1], name, unix.AT_REMOVEDIR)
	}
	unix.Close(fds[0])
}

// The walk remembers only files it can meet again (more than one link):
// 5,000 plain files cost it nothing to remember, two linked ones one entry.
func TestDirUsageRemembersOnlyLinkedFiles(t *testing.T) {
	dir := t.TempDir()
	for i := range 5000 {
		os.WriteFile(filepath.Join(dir, "f"+strconv.Itoa(i)), []byte("x"), 0o644)
	}
	os.Link(filepath.Join(dir, "f0"), filepath.Join(dir, "again"))
	f, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	w := walker{seen: map[fileID]struct{}{}}
	if err := w.walk(f, 1); err != nil {
		t.Fatal(err)
	}
	if w.inodes != 5000 || len(w.seen) != 1 {
		t.Errorf("%d inodes, %d remembered: want 5000 and 1", w.inodes, len(w.seen))
	}
}
