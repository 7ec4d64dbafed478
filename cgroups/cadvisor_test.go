package cgroups

import (
	"os"
	"path/filepath"
	"testing"
)

func TestOpenFilesLimit(t *testing.T) {
	const head = "Limit                     Soft Limit           Hard Limit           Units     \n" +
		"Max cpu time              unlimited            unlimited            seconds   \n"
	for _, c := range []struct {
		line       string
		soft, hard int64
		ok         bool
	}{
		{"Max open files            1024                 524288               files     \n", 1024, 524288, true},
		{"Max open files            unlimited            unlimited            files     \n", -1, -1, true},
		{"Max open files            lots                 524288               files     \n", 0, 524288, false},
		{"Max open files            1024\n", 0, 0, false},
		{"Max processes             1024                 1024                 processes \n", 0, 0, false},
	} {
		path := filepath.Join(t.TempDir(), "limits")
		if err := os.WriteFile(path, []byte(head+c.line), 0o644); err != nil {
			t.Fatal(err)
		}
		got, ok := openFilesLimit(path)
		if ok != c.ok || (ok && (got.Name != "max_open_files" || got.SoftLimit != c.soft || got.HardLimit != c.hard)) {
			t.Errorf("%q: got %+v ok=%v, want soft %d hard %d ok=%v", c.line, got, ok, c.soft, c.hard, c.ok)
		}
	}
	if _, ok := openFilesLimit(filepath.Join(t.TempDir(), "gone")); ok {
		t.Error("a missing file read as a limit")
	}
}

func TestOOMKills(t *testing.T) {
	v1, v2 := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(v1, "memory.oom_control"), []byte("oom_kill_disable 0\nunder_oom 0\noom_kill 3\n"), 0o644)
	os.WriteFile(filepath.Join(v2, "memory.events"), []byte("low 0\nhigh 7\nmax 9\noom 2\noom_kill 2\noom_group_kill 0\n"), 0o644)
	if got := oomKills(v1); got != 3 {
		t.Errorf("v1 oom kills %d, want 3", got)
	}
	if got := oomKills(v2); got != 2 {
		t.Errorf("v2 oom kills %d, want 2", got)
	}
	if got := oomKills(t.TempDir()); got != 0 {
		t.Errorf("no files: %d, want 0", got)
	}
}
