package volumes

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestOpenBeneathRefusesEveryWayOut(t *testing.T) {
	vol := t.TempDir()
	if err := os.Chmod(vol, 0o777); err != nil {
		t.Fatal(err)
	}
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "secret"), []byte("host"), 0o600)
	os.MkdirAll(filepath.Join(vol, "real", "dir"), 0o755)
	os.Symlink("/", filepath.Join(vol, "root"))             // the swap the audit made
	os.Symlink(outside, filepath.Join(vol, "real", "out"))  // a symlink deeper down
	os.Symlink("dir", filepath.Join(vol, "real", "inside")) // stays in the volume: followed
	os.Symlink("../..", filepath.Join(vol, "real", "up"))   // relative, but out
	os.Symlink(filepath.Join(outside, "secret"), filepath.Join(vol, "file"))

	for sub, want := range map[string]string{
		"root":               "root leads out of the volume",
		"root/etc":           "root leads out of the volume",
		"real/out/secret":    "real/out leads out of the volume",
		"real/up/x":          "real/up leads out of the volume",
		"file":               "file leads out of the volume",
		"real/../../escape":  "must not contain '..'",
		"real/dir/../../../": "must not contain '..'",
	} {
		fd, err := openBeneath(vol, sub)
		if err == nil {
			unix.Close(fd)
			t.Errorf("%s: opened; want %q", sub, want)
			continue
		}
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v; want %q", sub, err, want)
		}
	}
}

func TestOpenBeneathFollowsSymlinksThatStayInside(t *testing.T) {
	vol := t.TempDir()
	os.MkdirAll(filepath.Join(vol, "v2", "conf"), 0o755)
	os.Symlink("v2", filepath.Join(vol, "current")) // a ConfigMap volume's ..data, say
	fd, err := openBeneath(vol, "current/conf")
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	var got, want unix.Stat_t
	unix.Fstat(fd, &got)
	unix.Stat(filepath.Join(vol, "v2", "conf"), &want)
	if got.Ino != want.Ino {
		t.Error("current/conf did not resolve to v2/conf")
	}
}

func TestOpenBeneathCreatesMissingDirectoriesWithTheVolumesMode(t *testing.T) {
	vol := t.TempDir()
	if err := os.Chmod(vol, 0o777); err != nil {
		t.Fatal(err)
	}
	for _, sub := range []string{"a/b/c", "./a//b/c/", "a"} {
		fd, err := openBeneath(vol, sub)
		if err != nil {
			t.Fatalf("%s: %v", sub, err)
		}
		var st unix.Stat_t
		unix.Fstat(fd, &st)
		unix.Close(fd)
		if st.Mode&unix.S_IFMT != unix.S_IFDIR {
			t.Errorf("%s: not a directory", sub)
		}
	}
	st, err := os.Stat(filepath.Join(vol, "a", "b", "c"))
	if err != nil || st.Mode().Perm() != 0o777 {
		t.Errorf("created a/b/c: %v, mode %v; want 0777 like the volume (no umask)", err, st.Mode())
	}
}
