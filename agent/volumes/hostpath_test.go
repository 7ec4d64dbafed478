package volumes

import (
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
)

// hostFixtures makes one of each kind of file the hostPath types name.
func hostFixtures(t *testing.T) map[string]string {
	dir := t.TempDir()
	paths := map[string]string{
		"dir":     filepath.Join(dir, "dir"),
		"file":    filepath.Join(dir, "file"),
		"socket":  filepath.Join(dir, "sock"),
		"char":    "/dev/null",
		"block":   filepath.Join(dir, "block"),
		"linkDir": filepath.Join(dir, "link-to-dir"),
		"fifo":    filepath.Join(dir, "fifo"),
		"missing": filepath.Join(dir, "missing"),
	}
	if err := os.Mkdir(paths["dir"], 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(paths["file"], nil, 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", paths["socket"])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	if err := unix.Mknod(paths["block"], unix.S_IFBLK|0o600, int(unix.Mkdev(7, 0))); err != nil {
		t.Fatalf("make a block device to check against (needs CAP_MKNOD): %v", err)
	}
	if err := os.Symlink(paths["dir"], paths["linkDir"]); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mkfifo(paths["fifo"], 0o600); err != nil {
		t.Fatal(err)
	}
	return paths
}

// Each type accepts what it names and refuses the rest with the kubelet's
// message; "" checks nothing.
func TestHostPathTypeChecks(t *testing.T) {
	paths := hostFixtures(t)
	accepts := map[corev1.HostPathType][]string{
		corev1.HostPathUnset:     {"dir", "file", "socket", "char", "block", "linkDir", "fifo", "missing"},
		corev1.HostPathDirectory: {"dir", "linkDir"},
		corev1.HostPathFile:      {"file"},
		corev1.HostPathSocket:    {"socket"},
		corev1.HostPathCharDev:   {"char"},
		corev1.HostPathBlockDev:  {"block"},
	}
	what := map[corev1.HostPathType]string{
		corev1.HostPathDirectory: "directory", corev1.HostPathFile: "file", corev1.HostPathSocket: "socket file",
		corev1.HostPathCharDev: "character device", corev1.HostPathBlockDev: "block device",
	}
	kind := map[string]string{"dir": "Directory", "linkDir": "Directory", "file": "File", "socket": "Socket", "char": "CharDevice", "block": "BlockDevice"}
	for typ, ok := range accepts {
		for name, path := range paths {
			err := checkHostPath(path, typ)
			want := ""
			switch {
			case slices.Contains(ok, name):
			case name == "missing":
				want = `hostPath type check failed, ` + path + ` is not a ` + what[typ] + `, unable to determine its type: path "` + path + `" does not exist`
			case name == "fifo":
				want = `hostPath type check failed, ` + path + ` is not a ` + what[typ] + `, unable to determine its type: only recognise file, directory, socket, block device and character device`
			default:
				want = `hostPath type check failed: ` + path + ` is not a ` + what[typ] + `, it's a ` + kind[name]
			}
			if got := errString(err); got != want {
				t.Errorf("type %q on %s: error %q, want %q", typ, name, got, want)
			}
		}
	}
	if _, err := os.Lstat(paths["missing"]); err == nil {
		t.Error("a check without OrCreate made the missing path")
	}
	if err := checkHostPath(paths["dir"], "Nonsense"); errString(err) != "Nonsense is an invalid volume type" {
		t.Errorf("unknown type: %v", err)
	}
}

func TestHostPathOrCreate(t *testing.T) {
	// The modes are the kubelet's, less the umask, as there.
	old := unix.Umask(0)
	unix.Umask(old)
	paths := hostFixtures(t)

	dir := filepath.Join(paths["missing"], "a", "b")
	if err := checkHostPath(dir, corev1.HostPathDirectoryOrCreate); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(dir); err != nil || !st.IsDir() || st.Mode().Perm() != 0o755&^os.FileMode(old) {
		t.Errorf("DirectoryOrCreate made %v (%v), want a directory 0755 less the umask %04o, with its parents", st, err, old)
	}
	if err := checkHostPath(paths["file"], corev1.HostPathDirectoryOrCreate); !strings.Contains(errString(err), "is not a directory, it's a File") {
		t.Errorf("DirectoryOrCreate on a file: %v", err)
	}

	file := filepath.Join(dir, "xtables.lock")
	if err := checkHostPath(file, corev1.HostPathFileOrCreate); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(file); err != nil || !st.Mode().IsRegular() || st.Mode().Perm() != 0o644&^os.FileMode(old) || st.Size() != 0 {
		t.Errorf("FileOrCreate made %v (%v), want an empty file 0644", st, err)
	}
	if err := os.WriteFile(file, []byte("held"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := checkHostPath(file, corev1.HostPathFileOrCreate); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(file); string(b) != "held" {
		t.Errorf("FileOrCreate on an existing file left %q, want it untouched", b)
	}
	if err := checkHostPath(paths["dir"], corev1.HostPathFileOrCreate); !strings.Contains(errString(err), "is not a file, it's a Directory") {
		t.Errorf("FileOrCreate on a directory: %v", err)
	}
	orphan := filepath.Join(paths["missing"], "no-parent", "file")
	if err := checkHostPath(orphan, corev1.HostPathFileOrCreate); err == nil {
		t.Error("FileOrCreate made a file whose parent is missing; the kubelet makes no directories for it")
	}
	if _, err := os.Lstat(filepath.Dir(orphan)); err == nil {
		t.Error("FileOrCreate made the parent directory")
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
