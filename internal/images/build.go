// Package images builds the project's container images from local files, so a
// node needs no outside registry: the pause image (the sandbox container) and
// the test image (busybox plus the test helpers). Builds are deterministic:
// the same inputs give the same digests, so re-pushing is a no-op and image
// IDs stay stable across rebuilds.
package images

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"runtime"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// epoch is the modification time of every file in every layer, for
// reproducible digests.
var epoch = time.Unix(0, 0).UTC()

const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// file is one entry of a layer: a regular file (Data or Source), a directory
// (Dir) or a symlink (Link).
type file struct {
	Path   string
	Mode   int64
	Data   []byte
	Source string // host file to copy when Data is nil
	Dir    bool
	Link   string
}

// Pause builds the pause image from the static pause binary at pauseBin.
func Pause(pauseBin string) (v1.Image, error) {
	return build([]file{{Path: "pause", Mode: 0o755, Source: pauseBin}}, v1.Config{
		Entrypoint: []string{"/pause"},
		Env:        []string{"PATH=" + defaultPath},
	})
}

// Test builds the test image: Debian's static busybox with a link per applet,
// plus the static helper binaries in helpers (installed as /bin/<base name>).
func Test(busybox string, helpers []string) (v1.Image, error) {
	var extra []file
	for _, h := range helpers {
		extra = append(extra, file{Path: "bin/" + path.Base(h), Mode: 0o755, Source: h})
	}
	files, err := busyboxRoot(busybox, baseAccounts, extra)
	if err != nil {
		return nil, err
	}
	return build(files, v1.Config{
		Cmd: []string{"/bin/sh"},
		Env: []string{"PATH=" + defaultPath},
	})
}

// accounts is an image's /etc/passwd and /etc/group.
type accounts struct{ passwd, group string }

var baseAccounts = accounts{
	passwd: "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n",
	group:  "root:x:0:\nnogroup:x:65534:\n",
}

// busyboxRoot is a small root file system: busybox with a link in /bin per
// applet, the usual directories, the accounts, and extra files. An extra
// file in /bin wins over the applet of the same name.
func busyboxRoot(busybox string, acct accounts, extra []file) ([]file, error) {
	applets, err := busyboxApplets(busybox)
	if err != nil {
		return nil, err
	}
	files := []file{
		{Path: "bin", Dir: true, Mode: 0o755},
		{Path: "etc", Dir: true, Mode: 0o755},
		{Path: "root", Dir: true, Mode: 0o700},
		{Path: "tmp", Dir: true, Mode: 0o1777},
		{Path: "var", Dir: true, Mode: 0o755},
		{Path: "var/tmp", Dir: true, Mode: 0o1777},
		{Path: "bin/busybox", Mode: 0o755, Source: busybox},
		{Path: "etc/passwd", Mode: 0o644, Data: []byte(acct.passwd)},
		{Path: "etc/group", Mode: 0o644, Data: []byte(acct.group)},
	}
	have := map[string]bool{"bin/busybox": true}
	for _, f := range extra {
		have[f.Path] = true
	}
	for _, a := range applets {
		if !have["bin/"+a] {
			files = append(files, file{Path: "bin/" + a, Link: "busybox"})
		}
	}
	return dedupDirs(append(files, extra...)), nil
}

// busyboxApplets lists the applets the busybox binary provides.
func busyboxApplets(busybox string) ([]string, error) {
	out, err := exec.Command(busybox, "--list").Output()
	if err != nil {
		return nil, fmt.Errorf("list applets of %s: %w", busybox, err)
	}
	var applets []string
	for _, a := range strings.Fields(string(out)) {
		if !strings.Contains(a, "/") {
			applets = append(applets, a)
		}
	}
	sort.Strings(applets)
	return applets, nil
}

func build(files []file, cfg v1.Config) (v1.Image, error) {
	layerTar, err := tarLayer(files)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("make layer: %w", err)
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.AppendLayers(img, layer)
	if err != nil {
		return nil, fmt.Errorf("append layer: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Architecture = runtime.GOARCH
	cf.OS = "linux"
	cf.Created = v1.Time{Time: epoch}
	cf.Config = cfg
	return mutate.ConfigFile(img, cf)
}

func tarLayer(files []file) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		hdr := &tar.Header{Name: f.Path, Mode: f.Mode, ModTime: epoch, Format: tar.FormatPAX}
		var data []byte
		switch {
		case f.Dir:
			hdr.Typeflag, hdr.Name = tar.TypeDir, f.Path+"/"
		case f.Link != "":
			hdr.Typeflag, hdr.Linkname, hdr.Mode = tar.TypeSymlink, f.Link, 0o777
		default:
			data = f.Data
			if data == nil {
				b, err := os.ReadFile(f.Source)
				if err != nil {
					return nil, fmt.Errorf("read %s for /%s: %w", f.Source, f.Path, err)
				}
				data = b
			}
			hdr.Typeflag, hdr.Size = tar.TypeReg, int64(len(data))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if _, err := tw.Write(data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
