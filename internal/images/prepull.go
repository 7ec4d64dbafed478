package images

import (
	"fmt"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// The suite's pre-pull list (test/e2e_node/image_list.go's
// NodePrePullImageList with test/e2e/common's PrePulledImages, the node
// problem detector's and the device plugins' images) names images that no
// spec run here starts. ImageGarbageCollect's AfterEach pulls the whole list
// again after its GC removed them, so each must be pullable: these stand-ins
// are a busybox root with one file naming what it stands in for.
var prePullStandIns = []struct{ key, name string }{
	{"promoterE2eRegistry", "ipc-utils:1.4"},
	{"promoterE2eRegistry", "perl:5.26"},
	{"promoterE2eRegistry", "volume/nfs:1.6.0"},
	{"promoterE2eRegistry", "node-perf/npb-ep:1.6.0"},
	{"promoterE2eRegistry", "node-perf/npb-is:1.7.0"},
	{"promoterE2eRegistry", "node-perf/pytorch-wide-deep:1.0.0"},
	{"gcEtcdRegistry", "etcd:3.7.0-0"},
}

// prePullOutside are the list's names that KUBE_TEST_REPO_LIST cannot
// redirect (a host written out, or a digest no local build can have). The
// node holds them under that name, pinned (as containerd pins its sandbox
// image), since this host cannot reach their registries to pull them again
// after a GC.
var prePullOutside = []string{
	"gcr.io/cadvisor/cadvisor:v0.47.2",
	"registry.k8s.io/e2e-test-images/busybox@sha256:a9155b13325b2abef48e71de77bb8ac015412a566829f621d06bfae5c699b1b9",
	"registry.k8s.io/node-problem-detector/node-problem-detector:v1.35.2",
	"registry.k8s.io/e2e-test-images/sample-device-plugin:1.8.0",
	"docker.io/nfvpe/sriov-device-plugin:v3.1",
}

// prePull builds the stand-ins of the pre-pull list with build, which
// makes a busybox root with the extra files.
func prePull(build func(name string, extra []file) (v1.Image, error)) ([]UpstreamImage, error) {
	var out []UpstreamImage
	add := func(key, name, pin string) error {
		what := name
		if pin != "" {
			what = pin
		}
		img, err := build(name, []file{{Path: "nodeagent-stand-in", Mode: 0o644,
			Data: []byte(fmt.Sprintf("nodeagent stand-in for %s: on the suite's pre-pull list, run by no spec here\n", what))}})
		if err != nil {
			return err
		}
		out = append(out, UpstreamImage{Key: key, Name: name, Image: img, Pin: pin})
		return nil
	}
	for _, s := range prePullStandIns {
		if err := add(s.key, s.name, ""); err != nil {
			return nil, err
		}
	}
	for i, name := range prePullOutside {
		if err := add(outsideKey, fmt.Sprintf("pinned-%d:latest", i), name); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// outsideKey: an image pushed under the local registry's "outside/" path,
// which the node then holds, pinned, under its outside name.
const outsideKey = "outside"
