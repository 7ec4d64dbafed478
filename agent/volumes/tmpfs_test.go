package volumes

import (
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// Memory-backed volumes are noswap on a kernel that knows the option
// (6.4+; this project's hosts run 6.18), as the kubelet mounts them.
func TestTmpfsVolumesAreNoswap(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("mounting a tmpfs needs root; the test runs as root in make test")
	}
	var uts unix.Utsname
	unix.Uname(&uts)
	release := unix.ByteSliceToString(uts.Release[:])
	dir := t.TempDir()
	if err := mountTmpfs(dir, 1<<20); err != nil {
		t.Fatal(err)
	}
	defer unix.Unmount(dir, unix.MNT_DETACH)
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if fields := strings.Fields(line); len(fields) > 4 && fields[4] == dir {
			if !strings.Contains(line, "noswap") {
				t.Fatalf("tmpfs on %s (kernel %s) is not noswap: %s", dir, release, line)
			}
			return
		}
	}
	t.Fatalf("no mount at %s", dir)
}
