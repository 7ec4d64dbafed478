package stats

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	info "github.com/google/cadvisor/info/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestCPURateNeedsAReadingAtLeastASecondOld(t *testing.T) {
	var r cpuRates
	seen := map[string]bool{}
	t0 := time.Unix(1000, 0)
	if got := r.observe("/p", t0, 0, seen); got != nil {
		t.Fatalf("first reading gave a rate %d", *got)
	}
	if got := r.observe("/p", t0.Add(300*time.Millisecond), 1e8, seen); got != nil {
		t.Fatalf("a reading 300 ms later gave a rate %d", *got)
	}
	// 2 s after the first: half a core.
	if got := r.observe("/p", t0.Add(2*time.Second), 1e9, seen); got == nil || *got != 5e8 {
		t.Fatalf("rate %v, want 5e8", got)
	}
	// Right after: the window starts at the reading before, not 0 s ago.
	if got := r.observe("/p", t0.Add(2100*time.Millisecond), 1.05e9, seen); got == nil || *got != 5e8 {
		t.Fatalf("rate %v, want 5e8 over the earlier window", got)
	}
	r.forget(map[string]bool{})
	if got := r.observe("/p", t0.Add(5*time.Second), 2e9, seen); got != nil {
		t.Fatalf("a forgotten cgroup kept its readings")
	}
}

func TestNetworkStatsReadsEveryInterfaceButLoopback(t *testing.T) {
	dev := `Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo:    1000      10    0    0    0     0          0         0     1000      10    0    0    0     0       0          0
  eth0:  123456     100    2    0    0     0          0         0    65432      50    1    0    0     0       0          0
  eth1:       7       1    0    0    0     0          0         0        8       1    0    0    0     0       0          0
`
	path := filepath.Join(t.TempDir(), "dev")
	os.WriteFile(path, []byte(dev), 0o644)
	ns := networkStats(path, "eth0", metav1.Now())
	if ns == nil || len(ns.Interfaces) != 2 || ns.Name != "eth0" {
		t.Fatalf("network %+v", ns)
	}
	if *ns.RxBytes != 123456 || *ns.RxErrors != 2 || *ns.TxBytes != 65432 || *ns.TxErrors != 1 {
		t.Errorf("eth0 %+v", ns.InterfaceStats)
	}
	// cadvisor's view (/metrics/cadvisor) has packets and drops too.
	ifaces, ok := readNetDev(path)
	if !ok || len(ifaces) != 2 || ifaces[0].RxPackets != 100 || ifaces[0].TxPackets != 50 || ifaces[1].TxBytes != 8 {
		t.Errorf("readNetDev: %+v", ifaces)
	}
}

func TestReadNetDevIsBounded(t *testing.T) {
	var b strings.Builder
	b.WriteString("Inter-|\n face |\n")
	for i := 0; i < 10*maxInterfaces; i++ {
		fmt.Fprintf(&b, "veth%d: 1 1 0 0 0 0 0 0 1 1 0 0 0 0 0 0\n", i)
	}
	path := filepath.Join(t.TempDir(), "dev")
	os.WriteFile(path, []byte(b.String()), 0o644)
	if ifaces, ok := readNetDev(path); !ok || len(ifaces) != maxInterfaces {
		t.Errorf("read %d interfaces of %d, want the first %d", len(ifaces), 10*maxInterfaces, maxInterfaces)
	}
}

// Swap as the kubelet reports it: the use, and what is left under a limit.
func TestSwapStats(t *testing.T) {
	r := cgroupReading{Spec: info.ContainerSpec{HasMemory: true, Memory: info.MemorySpec{SwapLimit: 100 << 20}},
		Stats: &info.ContainerStats{Memory: info.MemoryStats{Swap: 30 << 20}}}
	s := swapStats(r)
	if s == nil || *s.SwapUsageBytes != 30<<20 || s.SwapAvailableBytes == nil || *s.SwapAvailableBytes != 70<<20 {
		t.Fatalf("limited: %+v", s)
	}
	r.Spec.Memory.SwapLimit = 1 << 63
	if s := swapStats(r); s.SwapAvailableBytes != nil {
		t.Fatalf("unlimited swap has an available figure: %d", *s.SwapAvailableBytes)
	}
	if s := swapStats(cgroupReading{Stats: &info.ContainerStats{}}); s != nil {
		t.Fatalf("no memory controller: %+v", s)
	}
}
