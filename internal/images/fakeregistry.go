package images

import (
	"fmt"
	"io"
	"path"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// fakeRegistryFiles lays img out as agnhost's fake-registry-server serves
// images from its /var/registry (test/images/agnhost/fakeregistryserver):
// <name>/manifests/<tag> holds the manifest's digest, and each manifest
// and blob sits at <kind>/sha256/<first two>/<hash>/data. The private
// registry specs pull name:tag from it.
func fakeRegistryFiles(name, tag string, img v1.Image) ([]file, error) {
	root := path.Join("var/registry", name)
	out := dirs(path.Join(root, "manifests"))
	out = append(out, file{Path: path.Join(root, "blobs"), Dir: true, Mode: 0o755})
	have := map[string]bool{}
	add := func(kind string, digest v1.Hash, data []byte) {
		dir := path.Join(root, kind, digest.Algorithm, digest.Hex[:2], digest.Hex)
		for _, d := range []string{path.Dir(path.Dir(dir)), path.Dir(dir), dir} {
			if !have[d] {
				have[d] = true
				out = append(out, file{Path: d, Dir: true, Mode: 0o755})
			}
		}
		out = append(out, file{Path: path.Join(dir, "data"), Mode: 0o644, Data: data})
	}
	manifest, err := img.RawManifest()
	if err != nil {
		return nil, err
	}
	digest, err := img.Digest()
	if err != nil {
		return nil, err
	}
	add("manifests", digest, manifest)
	out = append(out, file{Path: path.Join(root, "manifests", tag), Mode: 0o644, Data: []byte(digest.String() + "\n")})
	config, err := img.RawConfigFile()
	if err != nil {
		return nil, err
	}
	cfgName, err := img.ConfigName()
	if err != nil {
		return nil, err
	}
	add("blobs", cfgName, config)
	layers, err := img.Layers()
	if err != nil {
		return nil, err
	}
	for _, l := range layers {
		d, err := l.Digest()
		if err != nil {
			return nil, err
		}
		rc, err := l.Compressed()
		if err != nil {
			return nil, err
		}
		data, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			return nil, fmt.Errorf("layer %s: %w", d, err)
		}
		add("blobs", d, data)
	}
	return out, nil
}
