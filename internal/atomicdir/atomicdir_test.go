package atomicdir

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func read(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestWriteSwapsTheWholeSet(t *testing.T) {
	dir := t.TempDir()
	changed, err := Write(dir, map[string]File{"a": {Data: []byte("1"), Mode: 0o644}, "sub/b": {Data: []byte("2"), Mode: 0o600}}, NoOwner)
	if err != nil || !changed {
		t.Fatalf("first write: changed=%v err=%v", changed, err)
	}
	first, _ := os.Readlink(filepath.Join(dir, "..data"))
	if read(t, filepath.Join(dir, "a")) != "1" || read(t, filepath.Join(dir, "sub", "b")) != "2" {
		t.Fatal("files not visible through the links")
	}
	if l, _ := os.Readlink(filepath.Join(dir, "a")); l != "..data/a" {
		t.Errorf("a links to %q, want ..data/a", l)
	}
	if st, _ := os.Stat(filepath.Join(dir, "sub", "b")); st.Mode().Perm() != 0o600 {
		t.Errorf("sub/b mode %v, want 0600", st.Mode().Perm())
	}

	changed, err = Write(dir, map[string]File{"a": {Data: []byte("1"), Mode: 0o644}, "sub/b": {Data: []byte("2"), Mode: 0o600}}, NoOwner)
	if err != nil || changed {
		t.Fatalf("same set again: changed=%v err=%v, want no change", changed, err)
	}
	if l, _ := os.Readlink(filepath.Join(dir, "..data")); l != first {
		t.Errorf("an unchanged set was rewritten: %s -> %s", first, l)
	}

	changed, err = Write(dir, map[string]File{"a": {Data: []byte("3"), Mode: 0o644}}, NoOwner)
	if err != nil || !changed {
		t.Fatalf("update: changed=%v err=%v", changed, err)
	}
	if read(t, filepath.Join(dir, "a")) != "3" {
		t.Error("update not visible")
	}
	if _, err := os.Lstat(filepath.Join(dir, "sub")); !os.IsNotExist(err) {
		t.Errorf("a path gone from the set is still linked: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, first)); !os.IsNotExist(err) {
		t.Errorf("the old set %s was not removed: %v", first, err)
	}
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if len(names) != 3 { // ..<stamp>, ..data, a
		t.Errorf("directory holds %v, want the set, ..data and a", names)
	}
}

func TestWriteModeChangeIsAChange(t *testing.T) {
	dir := t.TempDir()
	Write(dir, map[string]File{"a": {Data: []byte("x"), Mode: 0o644}}, NoOwner)
	changed, err := Write(dir, map[string]File{"a": {Data: []byte("x"), Mode: 0o400}}, NoOwner)
	if err != nil || !changed {
		t.Fatalf("mode change: changed=%v err=%v", changed, err)
	}
	if st, _ := os.Stat(filepath.Join(dir, "a")); st.Mode().Perm() != 0o400 {
		t.Errorf("mode %v, want 0400", st.Mode().Perm())
	}
}

func TestWriteEmptySet(t *testing.T) {
	dir := t.TempDir()
	Write(dir, map[string]File{"a": {Data: []byte("x"), Mode: 0o644}}, NoOwner)
	if _, err := Write(dir, nil, NoOwner); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "a")); !os.IsNotExist(err) {
		t.Error("a is still there")
	}
	if _, err := os.Readlink(filepath.Join(dir, "..data")); err != nil {
		t.Errorf("an empty set still has ..data: %v", err)
	}
}

func TestWriteRefusesPathsThatLeave(t *testing.T) {
	for _, p := range []string{"", "/etc/passwd", "../x", "a/../../x", "..data", "a//b", "a/./b", "a/", strings.Repeat("x", 256), strings.Repeat("x/", 2100) + "x"} {
		dir := t.TempDir()
		if _, err := Write(dir, map[string]File{p: {Data: []byte("x"), Mode: 0o644}}, NoOwner); err == nil {
			t.Errorf("path %.40q accepted", p)
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 0 {
			t.Errorf("path %.40q: a refused set left %d entries", p, len(entries))
		}
	}
}

func TestWriteRemovesACutOffWrite(t *testing.T) {
	dir := t.TempDir()
	os.Mkdir(filepath.Join(dir, "..2020_01_01_00_00_00.1"), 0o755)
	if _, err := Write(dir, map[string]File{"a": {Data: []byte("x"), Mode: 0o644}}, NoOwner); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "..2020_01_01_00_00_00.1")); !os.IsNotExist(err) {
		t.Error("a set left by a cut-off write was kept")
	}
}
