//go:build integration

package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// meminfoBytes reads a /proc/meminfo field in bytes.
func meminfoBytes(t *testing.T, field string) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb * 1024
		}
	}
	t.Fatalf("no %s in /proc/meminfo", field)
	return 0
}

// withSwap turns 64 MiB of swap on for the test, unless the host has swap
// already: a loop device over a file, which works whatever the file's
// filesystem (the v2 VM's root cannot hold a swap file; nothing swaps in
// these tests, only the limits are read).
func withSwap(t *testing.T) {
	t.Helper()
	if meminfoBytes(t, "SwapTotal") > 0 {
		return
	}
	file := filepath.Join(t.TempDir(), "swapfile")
	if out, err := exec.Command("dd", "if=/dev/zero", "of="+file, "bs=1M", "count=64", "status=none").CombinedOutput(); err != nil {
		t.Fatalf("turning swap on for the test: dd: %v\n%s", err, out)
	}
	out, err := exec.Command("losetup", "--find", "--show", file).CombinedOutput()
	if err != nil {
		t.Fatalf("turning swap on for the test: losetup: %v\n%s", err, out)
	}
	loop := strings.TrimSpace(string(out))
	t.Cleanup(func() {
		exec.Command("swapoff", loop).Run() // not on when mkswap or swapon failed
		if out, err := exec.Command("losetup", "-d", loop).CombinedOutput(); err != nil {
			t.Errorf("losetup -d %s: %v\n%s", loop, err, out)
		}
	})
	for _, cmd := range [][]string{{"mkswap", loop}, {"swapon", loop}} {
		if out, err := exec.Command(cmd[0], cmd[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("turning swap on for the test: %v: %v\n%s", cmd, err, out)
		}
	}
}

// swapMax is memory.swap.max of the pod's first container.
func swapMax(t *testing.T, cgroupRoot, qosDir string, p *corev1.Pod) int64 {
	t.Helper()
	dir := "/sys/fs/cgroup" + cgroupRoot + "/kubepods/" + qosDir + "pod" + string(p.UID) + "/" + strings.TrimPrefix(p.Status.ContainerStatuses[0].ContainerID, "containerd://")
	b, err := os.ReadFile(filepath.Join(dir, "memory.swap.max"))
	if err != nil {
		t.Fatal(err)
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		t.Fatalf("%s/memory.swap.max: %v", dir, err)
	}
	return v
}

// LimitedSwap as the kubelet, for what a node alone shows: refused on
// cgroup v1; on v2 an agent left at failSwapOn: true refuses a host with
// swap on, the node reports its swap, and static pods, which count as
// critical, get none (memory.swap.max 0) even when Burstable. The share of
// API pods is TestClusterLimitedSwap's.
func TestLimitedSwap(t *testing.T) {
	if cgroupManager(t).Version() == 1 {
		n := newNode(t, "memorySwap: {swapBehavior: LimitedSwap}\n")
		out, err := n.runOnce()
		if err == nil || !strings.Contains(out, "memorySwap.swapBehavior: LimitedSwap is only supported with cgroup v2") {
			t.Fatalf("LimitedSwap on cgroup v1: %v\n%s", err, out)
		}
		return
	}
	withSwap(t)
	refused := newNode(t, "")
	if out, err := refused.runOnce(); err == nil || !strings.Contains(out, "running with swap on is not supported") {
		t.Errorf("failSwapOn (default true) with swap on: %v\n%s", err, out)
	}
	n := newNode(t, "failSwapOn: false\nmemorySwap: {swapBehavior: LimitedSwap}\n")
	n.start()
	if c, swap := n.nodeObject().Status.NodeInfo.Swap, meminfoBytes(t, "SwapTotal"); c == nil || c.Capacity == nil || *c.Capacity != swap {
		t.Errorf("node swap %+v, want capacity %d", c, swap)
	}
	n.writeManifest("burst.yaml", podManifest("burst", "    resources: {requests: {memory: 64Mi}, limits: {memory: 128Mi}}\n"))
	if v := swapMax(t, n.cgroupRoot, "burstable/", n.waitRunning("burst")); v != 0 {
		t.Errorf("a static Burstable pod: memory.swap.max %d, want 0 (static pods are critical)", v)
	}
}

// LimitedSwap's share, on cgroup v2 with a control plane: a Burstable API
// pod's container gets its memory request's share of the node's swap, a
// container whose request equals its limit none. Run in the v2 VM with
// make test-v2 V2_CONTROLPLANE=1 (the control plane under TCG is too slow
// for CI's lane).
func TestClusterLimitedSwap(t *testing.T) {
	if cgroupManager(t).Version() == 1 {
		t.Skip("LimitedSwap needs cgroup v2: make test-v2 V2_CONTROLPLANE=1 V2_GO_TESTS=TestClusterLimitedSwap")
	}
	withSwap(t)
	n, cp := clusterNode(t, "failSwapOn: false\nmemorySwap: {swapBehavior: LimitedSwap}\n")
	n.start()
	memory, swap := meminfoBytes(t, "MemTotal"), meminfoBytes(t, "SwapTotal")
	mem := func(request, limit string) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources = corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(request)},
				Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(limit)}}
		}
	}
	for _, tc := range []struct {
		name, request, limit string
		want                 int64
	}{
		{"burst", "64Mi", "128Mi", int64(float64(64<<20) / float64(memory) * float64(swap))},
		{"even", "64Mi", "64Mi", 0},
	} {
		if _, err := cp.Client.CoreV1().Pods("default").Create(context.Background(), apiPod(tc.name, n.name, mem(tc.request, tc.limit)), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		p := cp.waitAPIPod(t, "default", tc.name, 3*time.Minute, "running", func(p *corev1.Pod) error {
			if p.Status.Phase != corev1.PodRunning || len(p.Status.ContainerStatuses) == 0 {
				return fmt.Errorf("phase %s", p.Status.Phase)
			}
			return nil
		})
		// The kernel keeps whole pages.
		want := tc.want / int64(os.Getpagesize()) * int64(os.Getpagesize())
		if got := swapMax(t, n.cgroupRoot, "burstable/", p); got != want {
			t.Errorf("%s: memory.swap.max %d, want %d (request %s of memory %d, of swap %d)", tc.name, got, want, tc.request, memory, swap)
		}
	}
}
