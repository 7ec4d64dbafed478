package devices

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	clocktesting "k8s.io/utils/clock/testing"
)

// fakePlugin is a device plugin: its devices go out on ListAndWatch
// whenever update is called; optionsErr fails GetDevicePluginOptions.
type fakePlugin struct {
	pluginapi.UnimplementedDevicePluginServer
	optionsErr error
	updates    chan []*pluginapi.Device
	srv        *grpc.Server

	mu        sync.Mutex
	allocated [][]string
	refuse    bool // Allocate fails
}

func (p *fakePlugin) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return &pluginapi.DevicePluginOptions{}, p.optionsErr
}

func (p *fakePlugin) ListAndWatch(_ *pluginapi.Empty, s pluginapi.DevicePlugin_ListAndWatchServer) error {
	for devs := range p.updates {
		if err := s.Send(&pluginapi.ListAndWatchResponse{Devices: devs}); err != nil {
			return err
		}
	}
	return errors.New("plugin stopping")
}

func (p *fakePlugin) Allocate(_ context.Context, req *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	ids := req.ContainerRequests[0].DevicesIds
	p.mu.Lock()
	refuse := p.refuse
	p.allocated = append(p.allocated, ids)
	p.mu.Unlock()
	if refuse {
		return nil, errors.New("no today")
	}
	return &pluginapi.AllocateResponse{ContainerResponses: []*pluginapi.ContainerAllocateResponse{{
		Envs: map[string]string{"DEVICES": strings.Join(ids, ",")},
	}}}, nil
}

// setup runs a manager and a plugin for resource in a short directory
// (unix socket paths are limited to 108 bytes).
func setup(t *testing.T, optionsErr error) (*Manager, *fakePlugin, *clocktesting.FakeClock, error) {
	t.Helper()
	dir, err := os.MkdirTemp("", "dp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC))
	m := NewManager(dir, clk, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})

	p := &fakePlugin{optionsErr: optionsErr, updates: make(chan []*pluginapi.Device, 4), srv: grpc.NewServer()}
	pluginapi.RegisterDevicePluginServer(p.srv, p)
	lis, err := net.Listen("unix", filepath.Join(dir, "fake.sock"))
	if err != nil {
		t.Fatal(err)
	}
	go p.srv.Serve(lis)
	t.Cleanup(p.srv.Stop)

	var conn *grpc.ClientConn
	for i := 0; ; i++ { // the manager's socket comes up in the background
		if _, err := os.Stat(filepath.Join(dir, "kubelet.sock")); err == nil || i == 100 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	conn, err = grpc.NewClient("unix://"+filepath.Join(dir, "kubelet.sock"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// The socket file appears at bind, a moment before it listens: a busy
	// machine may refuse the first tries.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		_, err = pluginapi.NewRegistrationClient(conn).Register(context.Background(), &pluginapi.RegisterRequest{
			Version: pluginapi.Version, Endpoint: "fake.sock", ResourceName: "example.com/gpu"})
		if status.Code(err) != codes.Unavailable || time.Now().After(deadline) {
			return m, p, clk, err
		}
	}
}

func waitFor(t *testing.T, m *Manager, capacity, allocatable int64) {
	t.Helper()
	var c, a corev1.ResourceList
	for range 200 {
		c, a = m.Resources()
		cq, aq := c["example.com/gpu"], a["example.com/gpu"]
		if _, ok := c["example.com/gpu"]; ok && cq.Value() == capacity && aq.Value() == allocatable {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("capacity %v allocatable %v, want %d and %d", c, a, capacity, allocatable)
}

func device(id string, healthy bool) *pluginapi.Device {
	h := pluginapi.Unhealthy
	if healthy {
		h = pluginapi.Healthy
	}
	return &pluginapi.Device{ID: id, Health: h}
}

func TestPluginWithoutOptionsIsRefused(t *testing.T) {
	m, _, _, err := setup(t, errors.New("no options today"))
	if err == nil || !strings.Contains(err.Error(), "failed to get device plugin options") || !strings.Contains(err.Error(), "no options today") {
		t.Fatalf("Register: %v", err)
	}
	if c, _ := m.Resources(); len(c) != 0 {
		t.Errorf("a refused plugin's resource is on the node: %v", c)
	}
}

func TestHealthCapacityAndAStoppedPlugin(t *testing.T) {
	m, p, clk, err := setup(t, nil)
	if err != nil {
		t.Fatal(err)
	}
	p.updates <- []*pluginapi.Device{device("a", true), device("b", true)}
	waitFor(t, m, 2, 2)
	p.updates <- []*pluginapi.Device{device("a", true), device("b", false)}
	waitFor(t, m, 2, 1)

	close(p.updates) // the stream ends: nothing allocatable, capacity kept
	waitFor(t, m, 2, 0)
	clk.Step(StopGracePeriod + time.Second)
	waitFor(t, m, 0, 0) // still listed, at 0: a resource a plugin served
}

func TestAllocateGivesHealthyFreeDevicesOnce(t *testing.T) {
	m, p, _, err := setup(t, nil)
	if err != nil {
		t.Fatal(err)
	}
	p.updates <- []*pluginapi.Device{device("a", true), device("b", false), device("c", true)}
	waitFor(t, m, 3, 2)
	one := corev1.ResourceList{"example.com/gpu": resource.MustParse("1")}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "p1"}}
	c := &corev1.Container{Name: "app", Resources: corev1.ResourceRequirements{Limits: one}}
	resps, err := m.Allocate(context.Background(), pod, c)
	if err != nil || len(resps) != 1 || resps[0].Envs["DEVICES"] != "a" {
		t.Fatalf("first container: %v %v", resps, err)
	}
	if again, _ := m.Allocate(context.Background(), pod, c); len(again) != 1 || again[0].Envs["DEVICES"] != "a" {
		t.Errorf("a restarted container must keep its device: %v", again)
	}
	other := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "p2"}}
	resps, err = m.Allocate(context.Background(), other, c)
	if err != nil || resps[0].Envs["DEVICES"] != "c" {
		t.Fatalf("second pod: %v %v (b is unhealthy, a is taken)", resps, err)
	}
	third := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "p3"}}
	if _, err := m.Allocate(context.Background(), third, c); err == nil || !strings.Contains(err.Error(), "Available: 0") {
		t.Errorf("third pod: %v, want no device available", err)
	}
	m.Release("p1")
	if resps, err := m.Allocate(context.Background(), third, c); err != nil || resps[0].Envs["DEVICES"] != "a" {
		t.Errorf("after p1 left: %v %v", resps, err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.allocated) != 3 {
		t.Errorf("plugin asked %d times, want 3 (a kept allocation is not asked again)", len(p.allocated))
	}
}

// A device's health reaches the statuses of the containers holding it
// (the kubelet's allocatedResourcesStatus), and a change is told for the
// pods that hold the device only.
func TestAllocatedStatusFollowsDeviceHealth(t *testing.T) {
	m, p, _, err := setup(t, nil)
	if err != nil {
		t.Fatal(err)
	}
	told := make(chan types.UID, 8)
	m.OnHealthChange(func(uid types.UID) { told <- uid })
	p.updates <- []*pluginapi.Device{device("a", true), device("b", true)}
	waitFor(t, m, 2, 2)
	one := corev1.ResourceList{"example.com/gpu": resource.MustParse("1")}
	c := &corev1.Container{Name: "app", Resources: corev1.ResourceRequirements{Limits: one}}
	for _, uid := range []types.UID{"p1", "p2"} {
		if _, err := m.Allocate(context.Background(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: uid}}, c); err != nil {
			t.Fatal(err)
		}
	}
	health := func(uid types.UID, want corev1.ResourceHealthStatus) []corev1.ResourceStatus {
		return []corev1.ResourceStatus{{Name: "example.com/gpu", Resources: []corev1.ResourceHealth{{ResourceID: map[types.UID]corev1.ResourceID{"p1": "a", "p2": "b"}[uid], Health: want}}}}
	}
	if got := m.AllocatedStatus("p1"); !reflect.DeepEqual(got, map[string][]corev1.ResourceStatus{"app": health("p1", corev1.ResourceHealthStatusHealthy)}) {
		t.Errorf("p1 healthy: %+v", got)
	}
	p.updates <- []*pluginapi.Device{device("a", true), device("b", false)}
	select {
	case uid := <-told:
		if uid != "p2" {
			t.Errorf("told of %s, want p2 (its device b turned unhealthy)", uid)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no pod told of the health change")
	}
	select {
	case uid := <-told:
		t.Errorf("also told of %s, whose device did not change", uid)
	case <-time.After(100 * time.Millisecond):
	}
	if got := m.AllocatedStatus("p2")["app"]; !reflect.DeepEqual(got, health("p2", corev1.ResourceHealthStatusUnhealthy)) {
		t.Errorf("p2 after b turned unhealthy: %+v", got)
	}
	if got := m.AllocatedStatus("p1")["app"]; !reflect.DeepEqual(got, health("p1", corev1.ResourceHealthStatusHealthy)) {
		t.Errorf("p1 after b turned unhealthy: %+v", got)
	}
	if got := m.AllocatedStatus("none"); len(got) != 0 {
		t.Errorf("a pod without devices: %+v", got)
	}

	// A container the plugin refuses leaves its pod's others their devices.
	p.mu.Lock()
	p.refuse = true
	p.mu.Unlock()
	second := &corev1.Container{Name: "second", Resources: corev1.ResourceRequirements{Limits: one}}
	p.updates <- []*pluginapi.Device{device("a", true), device("b", false), device("c", true)}
	waitFor(t, m, 3, 2)
	if _, err := m.Allocate(context.Background(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "p1"}}, second); err == nil {
		t.Fatal("a refused allocation succeeded")
	}
	if got := m.AllocatedStatus("p1"); len(got) != 1 || len(got["app"]) != 1 {
		t.Errorf("p1 after its second container was refused: %+v, want app's device kept", got)
	}
}

func TestExtendedResourceNames(t *testing.T) {
	for name, want := range map[string]bool{
		"example.com/gpu": true, "gpu": false, "kubernetes.io/gpu": false, "nvidia.kubernetes.io/gpu": false,
		"requests.example.com/gpu": false, "example.com/bad name": false,
	} {
		if got := isExtendedResource(name); got != want {
			t.Errorf("%q: %v, want %v", name, got, want)
		}
	}
}
