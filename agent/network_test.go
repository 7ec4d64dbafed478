package agent

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"nodeagent/cri/critest"
	"nodeagent/network"
)

// cniPlugins writes shell-script CNI plugins that answer VERSION.
func cniPlugins(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	script := "#!/bin/sh\necho '{\"cniVersion\":\"1.0.0\",\"supportedVersions\":[\"1.0.0\"]}'\n"
	for _, n := range []string{"bridge", "host-local", "portmap", "loopback"} {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// A joined node's network follows its spec.podCIDRs; without any it waits
// podCIDRWait, then takes the config's; CIDRs given later move it.
func TestPodNetworkFollowsTheNodesPodCIDRs(t *testing.T) {
	conf, rt := t.TempDir(), critest.New()
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	n := newPodNetwork(Options{CNIConfDir: conf, CNIBinDirs: []string{cniPlugins(t)}, Clock: clk}, nil, rt,
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx := context.Background()
	file := filepath.Join(conf, network.ConfFile)
	subnet := func() string {
		data, err := os.ReadFile(file)
		if err != nil {
			return ""
		}
		return string(data)
	}

	n.ensure(ctx, "") // API-server mode at start: nothing written
	bare := &corev1.Node{}
	n.follow(ctx, bare, "10.88.0.0/16")
	clk.Step(podCIDRWait - time.Second)
	n.follow(ctx, bare, "10.88.0.0/16")
	if got := subnet(); got != "" || rt.PodCIDR() != "" {
		t.Fatalf("within the wait: file %q, runtime told %q", got, rt.PodCIDR())
	}
	clk.Step(time.Second)
	n.follow(ctx, bare, "10.88.0.0/16")
	if !strings.Contains(subnet(), `"10.88.0.0/16"`) || rt.PodCIDR() != "10.88.0.0/16" {
		t.Fatalf("after the wait: the config's CIDR, got file %q, runtime %q", subnet(), rt.PodCIDR())
	}

	given := &corev1.Node{Spec: corev1.NodeSpec{PodCIDR: "10.244.7.0/24", PodCIDRs: []string{"10.244.7.0/24", "fd00:7::/64"}}}
	n.follow(ctx, given, "10.88.0.0/16")
	got := subnet()
	if !strings.Contains(got, `"10.244.7.0/24"`) || !strings.Contains(got, `"fd00:7::/64"`) || strings.Contains(got, "10.88.0.0/16") {
		t.Errorf("the Node's CIDRs: file %s", got)
	}
	if rt.PodCIDR() != "10.244.7.0/24,fd00:7::/64" {
		t.Errorf("runtime told %q", rt.PodCIDR())
	}
}

// A Node that has its CIDRs when first seen gets them at once.
func TestPodNetworkTakesTheNodesPodCIDRAtOnce(t *testing.T) {
	conf, rt := t.TempDir(), critest.New()
	n := newPodNetwork(Options{CNIConfDir: conf, CNIBinDirs: []string{cniPlugins(t)}, Clock: clocktesting.NewFakeClock(time.Unix(1000, 0))}, nil, rt,
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	n.follow(context.Background(), &corev1.Node{Spec: corev1.NodeSpec{PodCIDR: "10.244.1.0/24"}}, "10.88.0.0/16")
	if data, _ := os.ReadFile(filepath.Join(conf, network.ConfFile)); !strings.Contains(string(data), `"10.244.1.0/24"`) || rt.PodCIDR() != "10.244.1.0/24" {
		t.Errorf("file %s, runtime %q", data, rt.PodCIDR())
	}
}

// A configuration that fails is tried again after networkRetry, not at
// every status check: each try runs the CNI plugins.
func TestPodNetworkRetriesAFailureLater(t *testing.T) {
	conf, rt := t.TempDir(), critest.New()
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	bins := t.TempDir() // no plugins: validation fails
	n := newPodNetwork(Options{CNIConfDir: conf, CNIBinDirs: []string{bins}, Clock: clk}, nil, rt, slog.New(slog.NewTextHandler(io.Discard, nil)))
	node := &corev1.Node{Spec: corev1.NodeSpec{PodCIDR: "10.244.1.0/24"}}
	n.follow(context.Background(), node, "10.88.0.0/16")
	if n.retryAt.IsZero() {
		t.Fatal("a failed configuration set no retry time")
	}
	good := cniPlugins(t)
	n.binDirs = []string{good}
	clk.Step(networkRetry - time.Second)
	n.follow(context.Background(), node, "10.88.0.0/16")
	if rt.PodCIDR() != "" {
		t.Fatal("tried again before networkRetry")
	}
	clk.Step(time.Second)
	n.follow(context.Background(), node, "10.88.0.0/16")
	if rt.PodCIDR() != "10.244.1.0/24" {
		t.Errorf("not tried again after networkRetry: runtime told %q", rt.PodCIDR())
	}
}
