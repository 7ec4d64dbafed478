package volumes

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A file the container wrote is read; a symlink it planted out of the
// volume, a directory, ".." and an oversized file are not.
func TestReadBeneath(t *testing.T) {
	vol, outside := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(vol, "env"), []byte("A='1'\n"), 0o644)
	os.WriteFile(filepath.Join(outside, "secret"), []byte("host"), 0o600)
	os.Symlink(filepath.Join(outside, "secret"), filepath.Join(vol, "escape"))
	os.Symlink("env", filepath.Join(vol, "inside"))
	os.Mkdir(filepath.Join(vol, "dir"), 0o755)
	os.WriteFile(filepath.Join(vol, "big"), make([]byte, 2048), 0o644)
	for _, path := range []string{"env", "inside"} {
		if data, err := ReadBeneath(vol, path, 1024); err != nil || string(data) != "A='1'\n" {
			t.Errorf("%s: %q %v", path, data, err)
		}
	}
	for path, why := range map[string]string{"escape": "leads out of the volume", "dir": "not a regular file", "../x": "'..'", "big": "over 1024 bytes", "missing": "no such file"} {
		if _, err := ReadBeneath(vol, path, 1024); err == nil || !strings.Contains(err.Error(), why) {
			t.Errorf("%s: %v, want an error saying %q", path, err, why)
		}
	}
}
