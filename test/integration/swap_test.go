//go:build integration

package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
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

func swapPod(name, request, limit string) string {
	return podManifest(name, fmt.Sprintf("    resources: {requests: {memory: %s}, limits: {memory: %s}}\n", request, limit))
}

// LimitedSwap as the kubelet: refused on cgroup v1; on v2 a Burstable
// container's memory.swap.max is its request's share of the node's swap
// and a Guaranteed one's is 0, the node reports its swap, and an agent
// left at failSwapOn: true refuses to start on a host with swap on.
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
	memory, swap := meminfoBytes(t, "MemTotal"), meminfoBytes(t, "SwapTotal")
	if c := n.nodeObject().Status.NodeInfo.Swap; c == nil || c.Capacity == nil || *c.Capacity != swap {
		t.Errorf("node swap %+v, want capacity %d", c, swap)
	}
	n.writeManifest("burst.yaml", swapPod("burst", "64Mi", "128Mi"))
	n.writeManifest("guar.yaml", swapPod("guar", "64Mi", "64Mi"))
	for _, tc := range []struct {
		name, qos string
		want      int64
	}{
		{"burst", "burstable/", int64(float64(64<<20) / float64(memory) * float64(swap))},
		{"guar", "", 0},
	} {
		p := n.waitRunning(tc.name)
		dir := "/sys/fs/cgroup" + n.cgroupRoot + "/kubepods/" + tc.qos + "pod" + string(p.UID) + "/" + strings.TrimPrefix(p.Status.ContainerStatuses[0].ContainerID, "containerd://")
		b, err := os.ReadFile(filepath.Join(dir, "memory.swap.max"))
		if err != nil {
			t.Fatal(err)
		}
		// The kernel keeps whole pages.
		got, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if want := tc.want / int64(os.Getpagesize()) * int64(os.Getpagesize()); got != want {
			t.Errorf("%s: memory.swap.max %d, want %d (request/memory %d/%d of swap %d)", tc.name, got, want, 64<<20, memory, swap)
		}
	}
}
