package images

import (
	"fmt"
	"path"
	"slices"
	"sort"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// The upstream node e2e suite (k8s.io/kubernetes/test/e2e_node) names its
// images by registry key (test/utils/image/manifest.go); KUBE_TEST_REPO_LIST
// maps each key to a registry. These are the keys whose images are built
// here, and the path under the local registry each maps to.
var upstreamRegistries = map[string]string{
	"promoterE2eRegistry": "e2e-test-images",
	"gcRegistry":          "k8s",
	"gcEtcdRegistry":      "etcd",
}

// Other keys the suite knows are mapped to paths where nothing is pushed:
// their specs need an outside or authenticated registry, and a pull from
// the local one fails at once instead of waiting on DNS.
var upstreamUnserved = []string{
	"buildImageRegistry", "privateRegistry", "sigStorageRegistry",
	"gcAuthenticatedRegistry", "invalidRegistry", "dockerLibraryRegistry",
	"cloudProviderGcpRegistry",
}

// UpstreamInputs are the local files the upstream suite's images are built
// from.
type UpstreamInputs struct {
	Busybox    string    // static busybox 1.37 (defconfig, as upstream's image): the base of every image
	Pause      string    // static pause binary
	Agnhost    string    // static agnhost, built from k8s.io/kubernetes/test/images/agnhost
	AgnhostTLS [2]string // porter's localhost.crt and localhost.key from the same tree
	NNP        string    // static binary printing its effective uid (nonewprivs)
	// AgnhostTools are host binaries agnhost's image carries (its
	// Dockerfile adds bash, curl, netcat and more with apk), with their
	// libraries: SRC at its own path, or SRC=DEST.
	AgnhostTools []string
	// Hostname is glibc's hostname program (Debian's /usr/bin/hostname)
	// for the glibc-dns-testing image.
	Hostname string
}

// UpstreamImage is one image of the set: its registry key, its name:tag
// under that registry, and what stands in for the upstream build. Pin, if
// set, is the outside name the node holds it under, pinned (prepull.go).
type UpstreamImage struct {
	Key, Name string
	Image     v1.Image
	Pin       string
}

// Ref is the image's reference under a local registry host.
func (u UpstreamImage) Ref(registry string) string {
	if u.Key == outsideKey {
		return registry + "/" + outsideKey + "/" + u.Name
	}
	return registry + "/" + upstreamRegistries[u.Key] + "/" + u.Name
}

// UpstreamRepoList is the KUBE_TEST_REPO_LIST file that points the suite at
// registry (host:port): YAML, one key per line.
func UpstreamRepoList(registry string) string {
	keys := make([]string, 0, len(upstreamRegistries)+len(upstreamUnserved))
	lines := map[string]string{}
	for k, p := range upstreamRegistries {
		keys, lines[k] = append(keys, k), registry+"/"+p
	}
	for _, k := range upstreamUnserved {
		keys, lines[k] = append(keys, k), registry+"/unserved/"+strings.ToLower(k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s: %s\n", k, lines[k])
	}
	return b.String()
}

// Upstream builds the images the suite's [NodeConformance] specs run, with
// the names and tags of test/utils/image/manifest.go. Each is a busybox root
// with what its upstream Dockerfile adds; nginx and httpd are stand-ins
// (busybox httpd serving :80), as the specs only need a long-running
// server. docs/upstream-conformance.md lists each one.
func Upstream(in UpstreamInputs) ([]UpstreamImage, error) {
	// The container lifecycle specs time with nmeter, which distribution
	// builds such as Debian's leave out.
	applets, err := busyboxApplets(in.Busybox)
	if err != nil {
		return nil, err
	}
	if !slices.Contains(applets, "nmeter") {
		return nil, fmt.Errorf("busybox %s has no nmeter applet, which the specs time with: build busybox from source with its defconfig (hack/upstream.sh busybox)", in.Busybox)
	}
	var out []UpstreamImage
	add := func(key, name string, acct accounts, extra []file, cfg v1.Config) error {
		files, err := busyboxRoot(in.Busybox, acct, extra)
		if err != nil {
			return err
		}
		if cfg.Env == nil {
			cfg.Env = []string{"PATH=" + defaultPath}
		}
		img, err := build(files, cfg)
		if err != nil {
			return fmt.Errorf("build %s: %w", name, err)
		}
		out = append(out, UpstreamImage{Key: key, Name: name, Image: img})
		return nil
	}
	const e2e = "promoterE2eRegistry"

	pause, err := Pause(in.Pause)
	if err != nil {
		return nil, err
	}
	out = append(out, UpstreamImage{Key: "gcRegistry", Name: "pause:3.10.2", Image: pause})

	if err := add(e2e, "busybox:1.37.0-2", baseAccounts, nil, v1.Config{Cmd: []string{"sh"}}); err != nil {
		return nil, err
	}

	// agnhost: its Dockerfile's user and group, files and entry point.
	agnhostAccounts := accounts{
		passwd: baseAccounts.passwd + "user-defined-in-image:x:1000:1000::/home/user-defined-in-image:/bin/sh\n",
		group:  baseAccounts.group + "user-defined-in-image:x:1000:\ngroup-defined-in-image:x:50000:user-defined-in-image\n",
	}
	agnhost := []file{
		{Path: "agnhost", Mode: 0o755, Source: in.Agnhost},
		{Path: "agnhost-2", Link: "agnhost"},
		{Path: "localhost.crt", Mode: 0o644, Source: in.AgnhostTLS[0]},
		{Path: "localhost.key", Mode: 0o644, Source: in.AgnhostTLS[1]},
		{Path: "uploads", Dir: true, Mode: 0o755},
		{Path: "home", Dir: true, Mode: 0o755},
		{Path: "home/user-defined-in-image", Dir: true, Mode: 0o755},
	}
	for _, tool := range in.AgnhostTools {
		src, dest, ok := strings.Cut(tool, "=")
		if !ok {
			dest = src
		}
		files, err := hostBinary(src, strings.TrimPrefix(path.Clean(dest), "/"))
		if err != nil {
			return nil, fmt.Errorf("agnhost tool: %w", err)
		}
		agnhost = append(agnhost, files...)
	}
	// The release's agnhost and the one before it (AgnhostPrev, which the
	// image-update specs start from): the same program, a file naming the
	// tag so their digests differ.
	// Its fake-registry-server serves pause:testing (the pause image) from
	// /var/registry, as the real image's build lays it out.
	registry, err := fakeRegistryFiles("pause", "testing", pause)
	if err != nil {
		return nil, fmt.Errorf("agnhost's fake registry: %w", err)
	}
	agnhost = append(agnhost, registry...)
	for _, tag := range []string{"2.66.1", "2.55"} {
		files := append(slices.Clone(agnhost), file{Path: "image-tag", Mode: 0o644, Data: []byte(tag + "\n")})
		if err := add(e2e, "agnhost:"+tag, agnhostAccounts, files, v1.Config{
			Entrypoint:   []string{"/agnhost"},
			Cmd:          []string{"pause"},
			ExposedPorts: ports(80, 8080, 8081, 9376, 5000),
		}); err != nil {
			return nil, err
		}
	}

	// nonewprivs: a set-user-ID root binary that prints its effective uid.
	nnp := append(dirs("usr/local/bin"), file{Path: "usr/local/bin/nnp", Mode: 0o4755, Source: in.NNP})
	if err := add(e2e, "nonewprivs:1.4", baseAccounts, nnp, v1.Config{Cmd: []string{"nnp"}}); err != nil {
		return nil, err
	}

	if err := add(e2e, "nonroot:1.5", baseAccounts, nil, v1.Config{User: "1234", Cmd: []string{"sh"}}); err != nil {
		return nil, err
	}

	// glibc-dns-testing: the specs run `hostname` and `hostname -f`, whose
	// glibc build (Debian's, with its libraries) resolves the FQDN through
	// /etc/hosts as the upstream image's does; busybox's answers otherwise.
	hostname, err := hostBinary(in.Hostname, "bin/hostname")
	if err != nil {
		return nil, fmt.Errorf("glibc-dns-testing: %w", err)
	}
	hostname = append(hostname, file{Path: "etc/nsswitch.conf", Mode: 0o644, Data: []byte("hosts: files dns\n")})
	if err := add(e2e, "glibc-dns-testing:2.1.1", baseAccounts, hostname, v1.Config{Cmd: []string{"sh"}}); err != nil {
		return nil, err
	}

	// kitten: the image volume specs mount it and read data.json and
	// etc/os-release, whose words are its Alpine base's.
	kitten := []file{
		{Path: "data.json", Mode: 0o644, Data: []byte(`{"image": "kitten.jpg", "note": "nodeagent stand-in for kitten:1.8"}` + "\n")},
		{Path: "etc/os-release", Mode: 0o644, Data: []byte("NAME=\"Alpine Linux\"\nID=alpine\nPRETTY_NAME=\"nodeagent stand-in for kitten:1.8 (upstream: Alpine Linux)\"\n")},
	}
	if err := add(e2e, "kitten:1.8", baseAccounts, kitten, v1.Config{Cmd: []string{"sh"}}); err != nil {
		return nil, err
	}

	// Stand-ins: a page that names the version, so the old and new tags
	// differ by digest as the image-update specs need.
	for _, s := range []struct{ name, docroot string }{
		{"nginx:1.27.0-2", "usr/share/nginx/html"},
		{"nginx:1.28.0-2", "usr/share/nginx/html"},
	} {
		page := fmt.Sprintf("<html><body>nodeagent stand-in for %s</body></html>\n", s.name)
		if err := add(e2e, s.name, baseAccounts, append(dirs(s.docroot),
			file{Path: s.docroot + "/index.html", Mode: 0o644, Data: []byte(page)}),
			v1.Config{
				Entrypoint:   []string{"/bin/httpd", "-f", "-p", "80", "-h", "/" + s.docroot},
				ExposedPorts: ports(80),
			}); err != nil {
			return nil, err
		}
	}
	pre, err := prePull(func(name string, extra []file) (v1.Image, error) {
		files, err := busyboxRoot(in.Busybox, baseAccounts, extra)
		if err != nil {
			return nil, err
		}
		img, err := build(files, v1.Config{Cmd: []string{"sh"}, Env: []string{"PATH=" + defaultPath}})
		if err != nil {
			return nil, fmt.Errorf("build %s: %w", name, err)
		}
		return img, nil
	})
	return append(out, pre...), err
}

// dirs lists the directory entries down to p.
func dirs(p string) []file {
	var out []file
	for d := p; d != "." && d != "/"; d = path.Dir(d) {
		out = append([]file{{Path: d, Dir: true, Mode: 0o755}}, out...)
	}
	return out
}

func ports(ps ...int) map[string]struct{} {
	m := map[string]struct{}{}
	for _, p := range ps {
		m[fmt.Sprintf("%d/tcp", p)] = struct{}{}
	}
	return m
}
