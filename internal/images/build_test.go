package images

import (
	"archive/tar"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// fakeBusybox stands in for Debian's busybox: it lists three applets.
func fakeBusybox(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "busybox")
	if err := os.WriteFile(p, []byte("#!/bin/sh\nprintf 'sh\\nsleep\\nmemhog\\n'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func helper(t *testing.T, name string) string {
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte("binary "+name), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestTestImageIsDeterministicAndComplete(t *testing.T) {
	bb, memhog := fakeBusybox(t), helper(t, "memhog")
	a, err := Test(bb, []string{memhog})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Test(bb, []string{memhog})
	if err != nil {
		t.Fatal(err)
	}
	da, _ := a.Digest()
	db, _ := b.Digest()
	if da != db {
		t.Errorf("two builds differ: %s vs %s", da, db)
	}
	layers, err := a.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers: %v %v", layers, err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	entries := map[string]*tar.Header{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		entries[h.Name] = h
	}
	if h := entries["bin/sh"]; h == nil || h.Typeflag != tar.TypeSymlink || h.Linkname != "busybox" {
		t.Errorf("bin/sh must link to busybox: %+v", h)
	}
	if h := entries["bin/memhog"]; h == nil || h.Typeflag != tar.TypeReg {
		t.Errorf("the memhog helper must win over the applet of the same name: %+v", h)
	}
	if h := entries["tmp/"]; h == nil || h.Mode != 0o1777 {
		t.Errorf("/tmp must be sticky and world-writable: %+v", h)
	}
	cf, _ := a.ConfigFile()
	if cf.OS != "linux" || len(cf.Config.Env) == 0 {
		t.Errorf("config: %+v", cf.Config)
	}
}

func TestPauseImage(t *testing.T) {
	img, err := Pause(helper(t, "pause"))
	if err != nil {
		t.Fatal(err)
	}
	cf, _ := img.ConfigFile()
	if len(cf.Config.Entrypoint) != 1 || cf.Config.Entrypoint[0] != "/pause" {
		t.Errorf("entrypoint %v", cf.Config.Entrypoint)
	}
	if _, err := Pause("/nonexistent/pause"); err == nil {
		t.Error("a missing binary must fail the build")
	}
}
