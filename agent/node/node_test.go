package node

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"nodeagent/agent/config"
)

func TestAllocatable(t *testing.T) {
	cfg := config.Defaults()
	cfg.SystemReserved = map[string]string{"cpu": "500m", "memory": "1Gi"}
	cfg.KubeReserved = map[string]string{"memory": "512Mi"}
	capacity := Machine{CPUs: 2, MemoryBytes: 8 << 30, PIDMax: 4096}.Capacity(110)
	alloc := Allocatable(capacity, &cfg)
	// memory: 8Gi - 1Gi - 512Mi - 100Mi (evictionHard default)
	if got, want := alloc.Memory().Value(), int64(8<<30-1<<30-512<<20-100<<20); got != want {
		t.Errorf("memory %d, want %d", got, want)
	}
	if got := alloc.Cpu().MilliValue(); got != 1500 {
		t.Errorf("cpu %dm, want 1500m", got)
	}
	if _, ok := alloc["pid"]; ok {
		t.Error("the internal pid entry must not be reported")
	}
	if got := alloc.Pods().Value(); got != 110 {
		t.Errorf("pods %d", got)
	}
	cfg.EvictionHard = map[string]string{"memory.available": "50%"}
	cfg.SystemReserved, cfg.KubeReserved = nil, nil
	alloc = Allocatable(capacity, &cfg)
	if got := alloc.Memory().Value(); got != 4<<30 {
		t.Errorf("percentage threshold: memory %d, want 4Gi", got)
	}
}

func TestMeminfo(t *testing.T) {
	p := filepath.Join(t.TempDir(), "meminfo")
	os.WriteFile(p, []byte("MemFree: 1 kB\nMemTotal:       24684084 kB\nSwapTotal:       1048572 kB\n"), 0o644)
	if got, err := meminfo(p, "MemTotal"); err != nil || got != 24684084*1024 {
		t.Errorf("MemTotal = %d, %v", got, err)
	}
	if got, err := meminfo(p, "SwapTotal"); err != nil || got != 1048572*1024 {
		t.Errorf("SwapTotal = %d, %v", got, err)
	}
	os.WriteFile(p, []byte("nothing\n"), 0o644)
	if _, err := meminfo(p, "MemTotal"); err == nil || !strings.Contains(err.Error(), p) {
		t.Errorf("want an error naming the file, got %v", err)
	}
}

func TestDefaultRouteInterface(t *testing.T) {
	p := filepath.Join(t.TempDir(), "route")
	os.WriteFile(p, []byte("Iface\tDestination\tGateway\nnodeagent0\t0000580A\t00000000\neth0\t00000000\t0102A8C0\n"), 0o644)
	if got := defaultRouteInterface(p); got != "eth0" {
		t.Errorf("got %q", got)
	}
}

func TestReadyCondition(t *testing.T) {
	now := time.Unix(100, 0)
	s := NewStatus(Facts{Name: "n", IP: "192.0.2.1", Version: "v", RuntimeVersion: "containerd://1", Capacity: corev1.ResourceList{"pid": resource.MustParse("1")}})
	if c := s.Node(now).Status.Conditions[0]; c.Status != corev1.ConditionUnknown {
		t.Errorf("before any check: %+v", c)
	}
	s.SetRuntime("", "NetworkReady=false reason:NetworkPluginNotReady message:cni plugin not initialized", now)
	c := s.Node(now).Status.Conditions[0]
	if c.Status != corev1.ConditionFalse || c.Reason != "KubeletNotReady" || !strings.Contains(c.Message, "container runtime network not ready: NetworkReady=false") {
		t.Errorf("network down: %+v", c)
	}
	s.SetRuntime("", "", now.Add(time.Minute))
	n := s.Node(now.Add(2 * time.Minute))
	if c := n.Status.Conditions[0]; c.Status != corev1.ConditionTrue || !c.LastTransitionTime.Time.Equal(now.Add(time.Minute)) {
		t.Errorf("ready: %+v", c)
	}
	if _, ok := n.Status.Capacity["pid"]; ok {
		t.Error("capacity must not show the internal pid entry")
	}
}

func TestDevicePluginResourcesJoinTheNode(t *testing.T) {
	gpus := corev1.ResourceList{"example.com/gpu": resource.MustParse("2")}
	none := corev1.ResourceList{"example.com/gpu": resource.MustParse("0")}
	s := NewStatus(Facts{Name: "n", Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")},
		Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")},
		Extended:    func() (corev1.ResourceList, corev1.ResourceList) { return gpus, none }})
	n := s.Node(time.Unix(100, 0))
	c, a := n.Status.Capacity["example.com/gpu"], n.Status.Allocatable["example.com/gpu"]
	if c.Value() != 2 || a.Value() != 0 || n.Status.Capacity.Cpu().Value() != 2 {
		t.Errorf("capacity %v allocatable %v", n.Status.Capacity, n.Status.Allocatable)
	}
	if again := s.Node(time.Unix(101, 0)); len(again.Status.Capacity) != 2 {
		t.Errorf("the facts were changed by the merge: %v", again.Status.Capacity)
	}
}
