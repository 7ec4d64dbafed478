package podresources

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	v1 "k8s.io/kubelet/pkg/apis/podresources/v1"
	"k8s.io/utils/cpuset"
)

type fakePods []*corev1.Pod

func (f fakePods) Active() []*corev1.Pod { return f }
func (f fakePods) Named(ns, name string) (*corev1.Pod, bool) {
	for _, p := range f {
		if p.Namespace == ns && p.Name == name {
			return p, true
		}
	}
	return nil, false
}

type fakeDevices struct{}

func (fakeDevices) ContainerDevices(uid types.UID, container string) map[string][]string {
	if uid == "uid-gpu" && container == "app" {
		return map[string][]string{"example.com/gpu": {"gpu-1", "gpu-0"}}
	}
	return nil
}
func (fakeDevices) AllocatableDevices() map[string][]string {
	return map[string][]string{"example.com/gpu": {"gpu-0", "gpu-1", "gpu-2"}}
}

type fakeCPUs struct{}

func (fakeCPUs) CPUs(uid types.UID, container string) (cpuset.CPUSet, bool) {
	if uid == "uid-gpu" && container == "app" {
		return cpuset.New(2, 3), true
	}
	return cpuset.New(0, 1), false // the shared pool is not reported
}
func (fakeCPUs) Allocatable() cpuset.CPUSet { return cpuset.New(1, 2, 3) }

func testPods() fakePods {
	always := corev1.ContainerRestartPolicyAlways
	gpu := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "gpu", Namespace: "ns", UID: "uid-gpu"}}
	gpu.Spec.InitContainers = []corev1.Container{{Name: "setup"}, {Name: "proxy", RestartPolicy: &always}}
	gpu.Spec.Containers = []corev1.Container{{Name: "app"}}
	plain := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "plain", Namespace: "ns", UID: "uid-plain"}}
	plain.Spec.Containers = []corev1.Container{{Name: "main"}}
	return fakePods{plain, gpu}
}

// The kubelet's answers: sidecars then app containers (not the init
// containers that ended), each container's devices and exclusive CPUs,
// what the node can allocate, and an error for an unknown pod; every call
// counted in the kubelet's metrics.
func TestServerAnswersAsTheKubelet(t *testing.T) {
	s := New(testPods(), fakeDevices{}, fakeCPUs{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx := context.Background()
	list, err := s.List(ctx, &v1.ListPodResourcesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(list.PodResources); n != 2 || list.PodResources[0].Name != "gpu" {
		t.Fatalf("list: %v", list)
	}
	gpu := list.PodResources[0]
	if len(gpu.Containers) != 2 || gpu.Containers[0].Name != "proxy" || gpu.Containers[1].Name != "app" {
		t.Errorf("containers %v, want the sidecar proxy then app", gpu.Containers)
	}
	app := gpu.Containers[1]
	if len(app.Devices) != 1 || app.Devices[0].ResourceName != "example.com/gpu" || strings.Join(app.Devices[0].DeviceIds, ",") != "gpu-0,gpu-1" {
		t.Errorf("app devices %v", app.Devices)
	}
	if len(app.CpuIds) != 2 || app.CpuIds[0] != 2 || app.CpuIds[1] != 3 {
		t.Errorf("app CPUs %v, want its exclusive 2,3", app.CpuIds)
	}
	if c := list.PodResources[1].Containers[0]; len(c.CpuIds) != 0 || len(c.Devices) != 0 {
		t.Errorf("a shared-pool container without devices: %v", c)
	}

	alloc, err := s.GetAllocatableResources(ctx, &v1.AllocatableResourcesRequest{})
	if err != nil || len(alloc.CpuIds) != 3 || len(alloc.Devices) != 1 || len(alloc.Devices[0].DeviceIds) != 3 {
		t.Errorf("allocatable %v %v", alloc, err)
	}
	if got, err := s.Get(ctx, &v1.GetPodResourcesRequest{PodNamespace: "ns", PodName: "plain"}); err != nil || got.PodResources.Containers[0].Name != "main" {
		t.Errorf("get plain: %v %v", got, err)
	}
	if _, err := s.Get(ctx, &v1.GetPodResourcesRequest{PodNamespace: "ns", PodName: "nope"}); err == nil || !strings.Contains(err.Error(), "pod nope in namespace ns not found") {
		t.Errorf("get unknown: %v", err)
	}

	want := map[string]float64{
		"kubelet_pod_resources_endpoint_requests_total":           4,
		"kubelet_pod_resources_endpoint_requests_list":            1,
		"kubelet_pod_resources_endpoint_requests_get_allocatable": 1,
		"kubelet_pod_resources_endpoint_requests_get":             2,
		"kubelet_pod_resources_endpoint_errors_get":               1,
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(s)
	for name, v := range want {
		got, err := testutil.GatherAndCount(reg, name)
		if err != nil || got != 1 {
			t.Errorf("%s: %d series (%v), want 1", name, got, err)
		}
		mfs, _ := reg.Gather()
		for _, mf := range mfs {
			if mf.GetName() == name {
				m := mf.GetMetric()[0]
				if m.GetCounter().GetValue() != v || m.GetLabel()[0].GetValue() != "v1" {
					t.Errorf("%s = %v %v, want %v{server_api_version=v1}", name, m.GetCounter().GetValue(), m.GetLabel(), v)
				}
			}
		}
	}
}

// Over the socket, with the kubelet's rate limit: a burst beyond 10 calls
// is refused with ResourceExhausted; the socket goes when the server stops.
func TestServerOverItsSocket(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "pod-resources", "kubelet.sock")
	s := New(testPods(), nil, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, sock) }()
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := v1.NewPodResourcesListerClient(conn)
	var list *v1.ListPodResourcesResponse
	for end := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if list, err = client.List(ctx, &v1.ListPodResourcesRequest{}); err == nil || time.Now().After(end) {
			break
		}
	}
	if err != nil || len(list.PodResources) != 2 {
		t.Fatalf("list over the socket: %v %v", list, err)
	}
	limited := 0
	for range 30 {
		if _, err := client.List(ctx, &v1.ListPodResourcesRequest{}); status.Code(err) == codes.ResourceExhausted {
			limited++
		}
	}
	if limited == 0 {
		t.Error("31 calls at once were all served; want the burst beyond 10 refused")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(sock); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket after stop: %v, want it removed", err)
	}
}
