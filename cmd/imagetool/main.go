// Command imagetool builds the project's images (pause and test) from local
// binaries and pushes them to a registry, the local one by default.
//
//	imagetool --pause-bin bin/images/pause --helpers bin/images/memhog,bin/images/probe-server \
//	          --pause-image 127.0.0.1:5050/nodeagent/pause:1.0 \
//	          --test-image 127.0.0.1:5050/nodeagent/test:latest [--out DIR] [--push]
//
// --out writes each image as an OCI layout under DIR/<name>; --push sends
// them to their registry over plain HTTP.
//
//	imagetool upstream --agnhost bin/upstream/agnhost --agnhost-tls CRT,KEY \
//	          --nnp bin/images/nnp --registry 127.0.0.1:5050 --repo-list FILE [--push]
//
// builds the images the upstream node e2e suite runs (internal/images.Upstream)
// and writes the KUBE_TEST_REPO_LIST file that points the suite at them.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"nodeagent/internal/images"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "upstream" {
		upstreamMain(os.Args[2:])
		return
	}
	pauseBin := flag.String("pause-bin", "bin/images/pause", "static pause binary")
	helpers := flag.String("helpers", "bin/images/memhog,bin/images/probe-server", "comma-separated static helper binaries for the test image")
	busybox := flag.String("busybox", "/bin/busybox", "static busybox binary (Debian's busybox-static)")
	pauseRef := flag.String("pause-image", "127.0.0.1:5050/nodeagent/pause:1.0", "pause image reference")
	testRef := flag.String("test-image", "127.0.0.1:5050/nodeagent/test:latest", "test image reference")
	out := flag.String("out", "", "write OCI layouts under this directory")
	push := flag.Bool("push", false, "push the images to their registry")
	flag.Parse()

	if err := run(context.Background(), *pauseBin, strings.Split(*helpers, ","), *busybox, *pauseRef, *testRef, *out, *push); err != nil {
		fmt.Fprintln(os.Stderr, "imagetool:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, pauseBin string, helpers []string, busybox, pauseRef, testRef, out string, push bool) error {
	pause, err := images.Pause(pauseBin)
	if err != nil {
		return fmt.Errorf("build pause image: %w", err)
	}
	test, err := images.Test(busybox, helpers)
	if err != nil {
		return fmt.Errorf("build test image: %w", err)
	}
	for _, im := range []struct {
		ref string
		img v1.Image
	}{{pauseRef, pause}, {testRef, test}} {
		digest, err := im.img.Digest()
		if err != nil {
			return err
		}
		if out != "" {
			if err := writeLayout(filepath.Join(out, layoutName(im.ref)), im.img); err != nil {
				return fmt.Errorf("write %s: %w", im.ref, err)
			}
		}
		if push {
			if err := pushImage(ctx, im.ref, im.img); err != nil {
				return err
			}
		}
		fmt.Printf("%s@%s\n", im.ref, digest)
	}
	return nil
}

func layoutName(ref string) string {
	r := strings.NewReplacer("/", "_", ":", "_")
	return r.Replace(ref)
}

func writeLayout(dir string, img v1.Image) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	return p.AppendImage(img)
}

func pushImage(ctx context.Context, ref string, img v1.Image) error {
	r, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		return fmt.Errorf("image reference %q: %w", ref, err)
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := remote.Write(r, img, remote.WithContext(ctx)); err != nil {
		return fmt.Errorf("push %s: %w (is the registry at %s running? try 'make runtime-up')", ref, err, r.Context().RegistryStr())
	}
	return nil
}

func upstreamMain(args []string) {
	fs := flag.NewFlagSet("imagetool upstream", flag.ExitOnError)
	var in images.UpstreamInputs
	fs.StringVar(&in.Busybox, "busybox", "bin/upstream/busybox", "static busybox 1.37 with its defconfig applets (hack/upstream.sh busybox builds it)")
	fs.StringVar(&in.Pause, "pause-bin", "bin/images/pause", "static pause binary")
	fs.StringVar(&in.Agnhost, "agnhost", "bin/upstream/agnhost", "static agnhost binary")
	tls := fs.String("agnhost-tls", "", "agnhost's porter/localhost.crt,porter/localhost.key")
	fs.StringVar(&in.NNP, "nnp", "bin/images/nnp", "static nnp binary (nonewprivs)")
	fs.StringVar(&in.Hostname, "hostname", "/usr/bin/hostname", "glibc's hostname program, for glibc-dns-testing (its libraries come along)")
	tools := fs.String("agnhost-tools", "/bin/bash,/usr/bin/curl", "comma-separated host binaries agnhost's image carries, SRC or SRC=DEST (their libraries come along)")
	registry := fs.String("registry", "127.0.0.1:5050", "registry host:port to push to")
	repoList := fs.String("repo-list", "", "write the KUBE_TEST_REPO_LIST file here")
	pins := fs.String("pins", "", "write here, one per line, each image the node must hold pinned under an outside name: REF NAME")
	push := fs.Bool("push", false, "push the images to the registry")
	_ = fs.Parse(args)
	crt, key, ok := strings.Cut(*tls, ",")
	if !ok {
		fmt.Fprintf(os.Stderr, "imagetool upstream: --agnhost-tls must be CRT,KEY, got %q\n", *tls)
		os.Exit(2)
	}
	in.AgnhostTLS = [2]string{crt, key}
	if *tools != "" {
		in.AgnhostTools = strings.Split(*tools, ",")
	}
	if err := runUpstream(context.Background(), in, *registry, *repoList, *pins, *push); err != nil {
		fmt.Fprintln(os.Stderr, "imagetool upstream:", err)
		os.Exit(1)
	}
}

func runUpstream(ctx context.Context, in images.UpstreamInputs, registry, repoList, pins string, push bool) error {
	set, err := images.Upstream(in)
	if err != nil {
		return err
	}
	var pinned strings.Builder
	for _, u := range set {
		if u.Pin != "" {
			fmt.Fprintf(&pinned, "%s %s\n", u.Ref(registry), u.Pin)
		}
		ref := u.Ref(registry)
		digest, err := u.Image.Digest()
		if err != nil {
			return err
		}
		if push {
			if err := pushImage(ctx, ref, u.Image); err != nil {
				return err
			}
		}
		fmt.Printf("%s@%s\n", ref, digest)
	}
	if pins != "" {
		if err := os.WriteFile(pins, []byte(pinned.String()), 0o644); err != nil {
			return err
		}
	}
	if repoList != "" {
		return os.WriteFile(repoList, []byte(images.UpstreamRepoList(registry)), 0o644)
	}
	return nil
}
