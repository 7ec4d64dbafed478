package images

import (
	"archive/tar"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// fakeBusybox stands in for Debian's busybox: it lists three applets.
func fakeBusybox(t *testing.T, applets ...string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "busybox")
	list := strings.Join(append([]string{"sh", "sleep", "memhog"}, applets...), "\\n")
	if err := os.WriteFile(p, []byte("#!/bin/sh\nprintf '"+list+"\\n'\n"), 0o755); err != nil {
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
	entries, _ := layerEntries(t, a)
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

// layerEntries reads an image's one layer into its tar headers and contents.
func layerEntries(t *testing.T, img v1.Image) (map[string]*tar.Header, map[string]string) {
	t.Helper()
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers: %v %v", layers, err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	headers, data := map[string]*tar.Header{}, map[string]string{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return headers, data
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		headers[h.Name], data[h.Name] = h, string(b)
	}
}

func TestUpstreamImages(t *testing.T) {
	in := UpstreamInputs{
		Busybox:      fakeBusybox(t, "nmeter"),
		Pause:        helper(t, "pause"),
		Agnhost:      helper(t, "agnhost"),
		AgnhostTLS:   [2]string{helper(t, "localhost.crt"), helper(t, "localhost.key")},
		NNP:          helper(t, "nnp"),
		AgnhostTools: []string{"/bin/bash", "/usr/bin/curl", "/bin/busybox=/usr/bin/nc"}, // dynamic ones bring their loader and libraries
		Hostname:     "/usr/bin/hostname",
	}
	set, err := Upstream(in)
	if err != nil {
		t.Fatal(err)
	}
	byRef := map[string]v1.Image{}
	digests := map[v1.Hash]string{}
	for _, u := range set {
		ref := u.Ref("127.0.0.1:5050")
		byRef[ref] = u.Image
		d, _ := u.Image.Digest()
		if other, ok := digests[d]; ok {
			t.Errorf("%s and %s have the same digest: the image-update specs need them apart", ref, other)
		}
		digests[d] = ref
	}
	for _, ref := range []string{
		"127.0.0.1:5050/k8s/pause:3.10.2",
		"127.0.0.1:5050/e2e-test-images/agnhost:2.66.1",
		"127.0.0.1:5050/e2e-test-images/agnhost:2.55",
		"127.0.0.1:5050/e2e-test-images/busybox:1.37.0-2",
		"127.0.0.1:5050/e2e-test-images/nonewprivs:1.4",
		"127.0.0.1:5050/e2e-test-images/nonroot:1.5",
		"127.0.0.1:5050/e2e-test-images/nginx:1.27.0-2",
		"127.0.0.1:5050/e2e-test-images/nginx:1.28.0-2",
		"127.0.0.1:5050/e2e-test-images/glibc-dns-testing:2.1.1",
	} {
		if byRef[ref] == nil {
			t.Errorf("missing %s", ref)
		}
	}

	agnhost := byRef["127.0.0.1:5050/e2e-test-images/agnhost:2.66.1"]
	cf, _ := agnhost.ConfigFile()
	if len(cf.Config.Entrypoint) != 1 || cf.Config.Entrypoint[0] != "/agnhost" || len(cf.Config.Cmd) != 1 || cf.Config.Cmd[0] != "pause" {
		t.Errorf("agnhost entrypoint %v cmd %v", cf.Config.Entrypoint, cf.Config.Cmd)
	}
	h, data := layerEntries(t, agnhost)
	libc := false
	for name := range h {
		libc = libc || strings.HasSuffix(name, "/libc.so.6")
	}
	if h["usr/bin/nc"] == nil || h["usr/bin/nc"].Typeflag != tar.TypeReg {
		t.Errorf("agnhost: a SRC=DEST tool is not at DEST: %+v", h["usr/bin/nc"])
	}
	if h["usr/bin/curl"] == nil || h["bin/bash"] == nil || !libc {
		t.Errorf("agnhost: curl %v, bash %v, their libc %v", h["usr/bin/curl"] != nil, h["bin/bash"] != nil, libc)
	}
	if h["agnhost-2"] == nil || h["agnhost-2"].Linkname != "agnhost" || h["uploads/"] == nil || h["localhost.key"] == nil {
		t.Errorf("agnhost files: agnhost-2 %+v uploads %+v", h["agnhost-2"], h["uploads/"])
	}
	if !strings.Contains(data["etc/passwd"], "user-defined-in-image:x:1000:") ||
		!strings.Contains(data["etc/group"], "group-defined-in-image:x:50000:user-defined-in-image") {
		t.Errorf("agnhost accounts:\n%s\n%s", data["etc/passwd"], data["etc/group"])
	}

	h, _ = layerEntries(t, byRef["127.0.0.1:5050/e2e-test-images/busybox:1.37.0-2"])
	if sh, nm := h["bin/sh"], h["bin/nmeter"]; sh == nil || sh.Linkname != "busybox" || nm == nil || nm.Linkname != "busybox" || h["bin/bash"] != nil {
		t.Errorf("busybox: sh %+v (want busybox's ash), nmeter %+v (want busybox's), bash %+v (want none)", sh, nm, h["bin/bash"])
	}

	in.Busybox = fakeBusybox(t)
	if _, err := Upstream(in); err == nil || !strings.Contains(err.Error(), "no nmeter applet") {
		t.Errorf("a busybox without nmeter: %v, want an error naming the applet", err)
	}

	h, _ = layerEntries(t, byRef["127.0.0.1:5050/e2e-test-images/nonewprivs:1.4"])
	if nnp := h["usr/local/bin/nnp"]; nnp == nil || nnp.Mode&0o4000 == 0 || nnp.Uid != 0 {
		t.Errorf("nnp must be set-user-ID root: %+v", nnp)
	}
	if h["usr/local/bin/"] == nil {
		t.Error("nnp's directory is missing")
	}
	cf, _ = byRef["127.0.0.1:5050/e2e-test-images/nonroot:1.5"].ConfigFile()
	if cf.Config.User != "1234" {
		t.Errorf("nonroot user %q", cf.Config.User)
	}
	cf, _ = byRef["127.0.0.1:5050/e2e-test-images/nginx:1.27.0-2"].ConfigFile()
	if strings.Join(cf.Config.Entrypoint, " ") != "/bin/httpd -f -p 80 -h /usr/share/nginx/html" {
		t.Errorf("nginx stand-in entrypoint %v", cf.Config.Entrypoint)
	}

	// The pre-pull list: every name the suite pulls after its image GC
	// spec is pushed where the repo list points, or held pinned.
	for _, ref := range []string{
		"127.0.0.1:5050/e2e-test-images/perl:5.26",
		"127.0.0.1:5050/e2e-test-images/node-perf/npb-ep:1.6.0",
		"127.0.0.1:5050/etcd/etcd:3.7.0-0",
	} {
		if byRef[ref] == nil {
			t.Errorf("pre-pull stand-in missing: %s", ref)
		}
	}
	pinned := map[string]string{}
	for _, u := range set {
		if u.Pin != "" {
			pinned[u.Pin] = u.Ref("127.0.0.1:5050")
			_, data := layerEntries(t, u.Image)
			if !strings.Contains(data["nodeagent-stand-in"], u.Pin) {
				t.Errorf("%s: its note does not name %s: %q", u.Ref("127.0.0.1:5050"), u.Pin, data["nodeagent-stand-in"])
			}
		}
	}
	if ref := pinned["gcr.io/cadvisor/cadvisor:v0.47.2"]; !strings.HasPrefix(ref, "127.0.0.1:5050/outside/") {
		t.Errorf("cadvisor is held pinned from %q, want a ref under outside/ (all: %v)", ref, pinned)
	}
	if len(pinned) != len(prePullOutside) {
		t.Errorf("%d pinned names, want %d: %v", len(pinned), len(prePullOutside), pinned)
	}

	list := UpstreamRepoList("127.0.0.1:5050")
	for _, want := range []string{"promoterE2eRegistry: 127.0.0.1:5050/e2e-test-images\n", "gcRegistry: 127.0.0.1:5050/k8s\n", "gcEtcdRegistry: 127.0.0.1:5050/etcd\n", "invalidRegistry: 127.0.0.1:5050/unserved/"} {
		if !strings.Contains(list, want) {
			t.Errorf("repo list lacks %q:\n%s", want, list)
		}
	}
}
