package launch

import (
	"os"
	"path/filepath"
	"testing"
)

// What a peer made outside its directories goes; what was there gets its
// mode back; a tree someone else filled meanwhile stays.
func TestPathsAfterAPeerAreAsBefore(t *testing.T) {
	dir := t.TempDir()
	was := filepath.Join(dir, "logs")
	os.Mkdir(was, 0o755)
	made, sock, filled := filepath.Join(dir, "plugins"), filepath.Join(dir, "plugins", "kubelet.sock"), filepath.Join(dir, "filled")
	snap := takePaths([]string{was, made, sock, filled})

	os.Chmod(was, 0o750) // as the kubelet does to /var/log/containers
	os.Mkdir(made, 0o755)
	os.WriteFile(sock, nil, 0o600)
	os.Mkdir(filled, 0o755)
	os.WriteFile(filepath.Join(filled, "other"), nil, 0o600)
	if err := snap.restore(); err == nil {
		t.Error("restore: no error for the filled directory it could not remove")
	}
	if st, err := os.Stat(was); err != nil || st.Mode().Perm() != 0o755 {
		t.Errorf("%s: mode %v (%v), want 0755 back", was, st.Mode(), err)
	}
	for _, p := range []string{sock, made} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s is left", p)
		}
	}
	if _, err := os.Stat(filepath.Join(filled, "other")); err != nil {
		t.Errorf("another's file was removed: %v", err)
	}
}
