// Package podresources serves the kubelet's pod resources API (v1) on
// <root-dir>/pod-resources/kubelet.sock: which devices and exclusive CPUs
// each running container holds, and what the node can allocate, for
// monitoring agents and device plugins' consumers. As the kubelet's, it is
// rate limited (100 calls a second, bursts of 10) and counted in the
// kubelet_pod_resources_endpoint_* metrics.
package podresources

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sort"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	v1 "k8s.io/kubelet/pkg/apis/podresources/v1"
	"k8s.io/utils/cpuset"

	"nodeagent/internal/qos"
)

// The kubelet's limits (pkg/kubelet/apis/podresources/constants.go).
const (
	qps   = 100
	burst = 10
)

// Pods are the pods the node runs.
type Pods interface {
	// Active are the admitted pods that are not finished or stopping.
	Active() []*corev1.Pod
	// Named is a pod the node knows by namespace and name.
	Named(namespace, name string) (*corev1.Pod, bool)
}

// Devices are the device plugins' devices: device IDs by resource.
type Devices interface {
	ContainerDevices(uid types.UID, container string) map[string][]string
	AllocatableDevices() map[string][]string
}

// CPUs is the CPU manager under the static policy.
type CPUs interface {
	CPUs(uid types.UID, container string) (set cpuset.CPUSet, exclusive bool)
	Allocatable() cpuset.CPUSet
}

// Server is the v1 PodResourcesLister. Devices and CPUs may be nil (no
// device plugins; CPU manager policy none).
type Server struct {
	v1.UnimplementedPodResourcesListerServer
	Pods    Pods
	Devices Devices
	CPUs    CPUs
	Log     *slog.Logger

	metrics *metrics
}

// New returns a server; its metrics are Collector.
func New(pods Pods, devices Devices, cpus CPUs, log *slog.Logger) *Server {
	return &Server{Pods: pods, Devices: devices, CPUs: cpus, Log: log, metrics: newMetrics()}
}

// List is every active pod's resources.
func (s *Server) List(context.Context, *v1.ListPodResourcesRequest) (*v1.ListPodResourcesResponse, error) {
	s.metrics.count("list")
	pods := s.Pods.Active()
	sort.Slice(pods, func(i, j int) bool {
		if pods[i].Namespace != pods[j].Namespace {
			return pods[i].Namespace < pods[j].Namespace
		}
		return pods[i].Name < pods[j].Name
	})
	out := &v1.ListPodResourcesResponse{PodResources: make([]*v1.PodResources, 0, len(pods))}
	for _, p := range pods {
		out.PodResources = append(out.PodResources, s.podResources(p))
	}
	return out, nil
}

// Get is one pod's resources.
func (s *Server) Get(_ context.Context, req *v1.GetPodResourcesRequest) (*v1.GetPodResourcesResponse, error) {
	s.metrics.count("get")
	p, ok := s.Pods.Named(req.GetPodNamespace(), req.GetPodName())
	if !ok {
		s.metrics.fail("get")
		return nil, fmt.Errorf("pod %s in namespace %s not found", req.GetPodName(), req.GetPodNamespace())
	}
	return &v1.GetPodResourcesResponse{PodResources: s.podResources(p)}, nil
}

// GetAllocatableResources is what the node can give: the plugins' healthy
// devices and, under the static policy, the CPUs outside the reserved set.
func (s *Server) GetAllocatableResources(context.Context, *v1.AllocatableResourcesRequest) (*v1.AllocatableResourcesResponse, error) {
	s.metrics.count("get_allocatable")
	out := &v1.AllocatableResourcesResponse{}
	if s.Devices != nil {
		out.Devices = containerDevices(s.Devices.AllocatableDevices())
	}
	if s.CPUs != nil {
		out.CpuIds = cpuIDs(s.CPUs.Allocatable())
	}
	return out, nil
}

// podResources lists the sidecars, then the app containers, as the
// kubelet's (other init containers have ended).
func (s *Server) podResources(p *corev1.Pod) *v1.PodResources {
	out := &v1.PodResources{Name: p.Name, Namespace: p.Namespace}
	add := func(c *corev1.Container) {
		cr := &v1.ContainerResources{Name: c.Name}
		if s.Devices != nil {
			cr.Devices = containerDevices(s.Devices.ContainerDevices(p.UID, c.Name))
		}
		if s.CPUs != nil {
			if set, exclusive := s.CPUs.CPUs(p.UID, c.Name); exclusive {
				cr.CpuIds = cpuIDs(set)
			}
		}
		out.Containers = append(out.Containers, cr)
	}
	for i := range p.Spec.InitContainers {
		if qos.IsSidecar(&p.Spec.InitContainers[i]) {
			add(&p.Spec.InitContainers[i])
		}
	}
	for i := range p.Spec.Containers {
		add(&p.Spec.Containers[i])
	}
	return out
}

func containerDevices(byResource map[string][]string) []*v1.ContainerDevices {
	names := make([]string, 0, len(byResource))
	for name := range byResource {
		names = append(names, name)
	}
	sort.Strings(names)
	var out []*v1.ContainerDevices
	for _, name := range names {
		ids := append([]string(nil), byResource[name]...)
		sort.Strings(ids)
		out = append(out, &v1.ContainerDevices{ResourceName: name, DeviceIds: ids})
	}
	return out
}

func cpuIDs(set cpuset.CPUSet) []int64 {
	var out []int64
	for _, id := range set.List() {
		out = append(out, int64(id))
	}
	return out
}

// Run serves the socket until ctx ends.
func (s *Server) Run(ctx context.Context, sock string) error {
	if err := os.MkdirAll(filepath.Dir(sock), 0o750); err != nil {
		return fmt.Errorf("pod resources: %w", err)
	}
	if err := os.Remove(sock); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("pod resources: remove stale %s: %w", sock, err)
	}
	lis, err := net.Listen("unix", sock)
	if err != nil {
		return fmt.Errorf("pod resources: %w", err)
	}
	limiter := rate.NewLimiter(qps, burst)
	srv := grpc.NewServer(grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		if !limiter.Allow() {
			return nil, status.Error(codes.ResourceExhausted, "rejected by rate limit")
		}
		return h(ctx, req)
	}))
	v1.RegisterPodResourcesListerServer(srv, s)
	go func() {
		<-ctx.Done()
		srv.Stop()
		os.Remove(sock)
	}()
	s.Log.Info("serving the pod resources API", "socket", sock)
	if err := srv.Serve(lis); err != nil && ctx.Err() == nil {
		return fmt.Errorf("pod resources: %w", err)
	}
	return nil
}

// metrics are the kubelet's kubelet_pod_resources_endpoint_* counters.
type metrics struct {
	requests, errors map[string]*prometheus.CounterVec // by method; "total" too
}

const apiVersion = "v1"

func newMetrics() *metrics {
	m := &metrics{requests: map[string]*prometheus.CounterVec{}, errors: map[string]*prometheus.CounterVec{}}
	counter := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Subsystem: "kubelet", Name: name, Help: help}, []string{"server_api_version"})
	}
	m.requests["total"] = counter("pod_resources_endpoint_requests_total", "Cumulative number of requests to the PodResource endpoint. Broken down by server api version.")
	for _, method := range []struct{ key, name string }{{"list", "List"}, {"get_allocatable", "GetAllocatableResources"}, {"get", "Get"}} {
		m.requests[method.key] = counter("pod_resources_endpoint_requests_"+method.key, "Number of requests to the PodResource "+method.name+" endpoint. Broken down by server api version.")
		m.errors[method.key] = counter("pod_resources_endpoint_errors_"+method.key, "Number of requests to the PodResource "+method.name+" endpoint which returned error. Broken down by server api version.")
	}
	return m
}

func (m *metrics) count(method string) {
	m.requests["total"].WithLabelValues(apiVersion).Inc()
	m.requests[method].WithLabelValues(apiVersion).Inc()
}

func (m *metrics) fail(method string) { m.errors[method].WithLabelValues(apiVersion).Inc() }

// Describe and Collect make the server's metrics a prometheus.Collector.
func (s *Server) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range s.metrics.all() {
		c.Describe(ch)
	}
}

func (s *Server) Collect(ch chan<- prometheus.Metric) {
	for _, c := range s.metrics.all() {
		c.Collect(ch)
	}
}

func (m *metrics) all() []*prometheus.CounterVec {
	out := []*prometheus.CounterVec{m.requests["total"]}
	for _, k := range []string{"list", "get_allocatable", "get"} {
		out = append(out, m.requests[k], m.errors[k])
	}
	return out
}
