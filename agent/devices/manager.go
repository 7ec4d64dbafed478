// Package devices is the agent's device plugin manager, the kubelet's
// devicemanager for the v1beta1 device plugin API: plugins register on
// <root>/device-plugins/kubelet.sock, the agent lists their devices
// (ListAndWatch) into the node's capacity and allocatable, and a container
// that requests an extended resource gets devices allocated by the plugin
// (Allocate): the plugin's environment, mounts, device nodes and
// annotations go into the container's config.
package devices

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	"k8s.io/utils/clock"
)

// StopGracePeriod is how long a stopped plugin's resource keeps its
// capacity (with nothing allocatable) before it leaves the node, as the
// kubelet's endpointStopGracePeriod.
const StopGracePeriod = 5 * time.Minute

// callTimeout bounds the unary calls to a plugin.
const callTimeout = 10 * time.Second

// Manager serves the registration socket and tracks the registered
// plugins and what they allocated. Safe for concurrent use.
type Manager struct {
	dir   string
	clock clock.Clock
	log   *slog.Logger

	mu        sync.Mutex
	plugins   map[string]*plugin                    // by resource name
	allocated map[types.UID]map[string][]allocation // pod -> container -> allocations
	healthOf  func(types.UID)
}

// plugin is one registered endpoint: its devices and their health.
type plugin struct {
	resource string
	conn     *grpc.ClientConn
	client   pluginapi.DevicePluginClient
	devices  map[string]bool // device ID -> healthy
	stopped  time.Time       // when its ListAndWatch ended (zero: running)
	cancel   context.CancelFunc
}

// allocation is one resource's devices for a container, and what the
// plugin said the container needs for them.
type allocation struct {
	Resource string
	Devices  []string
	Response *pluginapi.ContainerAllocateResponse
}

// NewManager returns a manager for the plugins' directory (the kubelet's
// <root-dir>/device-plugins).
func NewManager(dir string, clk clock.Clock, log *slog.Logger) *Manager {
	return &Manager{dir: dir, clock: clk, log: log, plugins: map[string]*plugin{}, allocated: map[types.UID]map[string][]allocation{}}
}

// OnHealthChange sets what is told of each pod holding a device whose
// health changed (the kubelet's health updates): its containers'
// allocatedResourcesStatus changes.
func (m *Manager) OnHealthChange(f func(types.UID)) {
	m.mu.Lock()
	m.healthOf = f
	m.mu.Unlock()
}

// Run serves the registration socket until ctx ends, then closes every
// plugin's connection.
func (m *Manager) Run(ctx context.Context) error {
	if err := os.MkdirAll(m.dir, 0o750); err != nil {
		return fmt.Errorf("device plugins: %w", err)
	}
	sock := filepath.Join(m.dir, "kubelet.sock")
	if err := os.Remove(sock); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("device plugins: remove stale %s: %w", sock, err)
	}
	lis, err := net.Listen("unix", sock)
	if err != nil {
		return fmt.Errorf("device plugins: %w", err)
	}
	srv := grpc.NewServer()
	pluginapi.RegisterRegistrationServer(srv, registration{m: m, ctx: ctx})
	go func() {
		<-ctx.Done()
		srv.Stop()
		m.mu.Lock()
		for _, p := range m.plugins {
			p.cancel()
			p.conn.Close()
		}
		m.mu.Unlock()
	}()
	m.log.Info("device plugin registration listening", "socket", sock)
	if err := srv.Serve(lis); err != nil && ctx.Err() == nil {
		return fmt.Errorf("device plugins: %w", err)
	}
	return nil
}

type registration struct {
	pluginapi.UnimplementedRegistrationServer
	m   *Manager
	ctx context.Context // the manager's: a plugin outlives its Register call
}

// Register admits a plugin, as the kubelet's: a supported version, an
// extended resource name, an endpoint in the plugins' directory, and
// options it can give; then its devices are listed and watched.
func (r registration) Register(ctx context.Context, req *pluginapi.RegisterRequest) (*pluginapi.Empty, error) {
	m := r.m
	if !slices.Contains(pluginapi.SupportedVersions[:], req.Version) {
		return nil, fmt.Errorf("invalid version %q, supported versions: %v", req.Version, pluginapi.SupportedVersions)
	}
	if !isExtendedResource(req.ResourceName) {
		return nil, fmt.Errorf("invalid extended resource name %q", req.ResourceName)
	}
	if req.Endpoint == "" || filepath.Base(req.Endpoint) != req.Endpoint {
		return nil, fmt.Errorf("invalid endpoint %q: the name of a socket in %s", req.Endpoint, m.dir)
	}
	conn, err := grpc.NewClient("unix://"+filepath.Join(m.dir, req.Endpoint), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("failed to dial device plugin: %w", err)
	}
	client := pluginapi.NewDevicePluginClient(conn)
	callCtx, cancel := context.WithTimeout(ctx, callTimeout)
	_, err = client.GetDevicePluginOptions(callCtx, &pluginapi.Empty{})
	cancel()
	if err != nil {
		conn.Close()
		m.log.Warn("device plugin refused: no options", "resource", req.ResourceName, "err", err)
		return nil, fmt.Errorf("failed to get device plugin options: %w", err)
	}
	watchCtx, stop := context.WithCancel(r.ctx)
	p := &plugin{resource: req.ResourceName, conn: conn, client: client, devices: map[string]bool{}, cancel: stop}
	m.mu.Lock()
	if old := m.plugins[req.ResourceName]; old != nil {
		old.cancel()
		old.conn.Close()
		// Health as last listed until the new endpoint lists its
		// devices, as the kubelet keeps them across registrations.
		p.devices = old.devices
	}
	m.plugins[req.ResourceName] = p
	m.mu.Unlock()
	m.log.Info("device plugin registered", "resource", req.ResourceName, "endpoint", req.Endpoint)
	go m.watch(watchCtx, p)
	return &pluginapi.Empty{}, nil
}

// watch follows a plugin's devices until its stream ends; the kubelet does
// not call ListAndWatch again, the plugin registers again.
func (m *Manager) watch(ctx context.Context, p *plugin) {
	stream, err := p.client.ListAndWatch(ctx, &pluginapi.Empty{})
	for err == nil {
		var resp *pluginapi.ListAndWatchResponse
		if resp, err = stream.Recv(); err != nil {
			break
		}
		devices := map[string]bool{}
		for _, d := range resp.Devices {
			devices[d.ID] = d.Health == pluginapi.Healthy
		}
		m.mu.Lock()
		old := p.devices
		p.devices = devices
		pods := m.holdersLocked(p.resource, func(id string) bool { return healthy(old, id) != healthy(devices, id) })
		f := m.healthOf
		m.mu.Unlock()
		m.log.Info("device plugin devices", "resource", p.resource, "devices", len(devices), "healthy", count(devices))
		for _, uid := range pods {
			if f != nil {
				f(uid)
			}
		}
	}
	m.mu.Lock()
	p.stopped = m.clock.Now()
	m.mu.Unlock()
	if ctx.Err() == nil {
		m.log.Warn("device plugin stopped; its resource is not allocatable", "resource", p.resource, "err", err)
	}
}

// healthy is a device's health as the pods see it: one the plugin no
// longer lists counts as healthy, as in the kubelet.
func healthy(devices map[string]bool, id string) bool {
	ok, listed := devices[id]
	return ok || !listed
}

// holdersLocked lists the pods holding a device of the resource that
// matches.
func (m *Manager) holdersLocked(resource string, match func(id string) bool) []types.UID {
	var out []types.UID
	for uid, containers := range m.allocated {
	pod:
		for _, as := range containers {
			for _, a := range as {
				if a.Resource == resource && slices.ContainsFunc(a.Devices, match) {
					out = append(out, uid)
					break pod
				}
			}
		}
	}
	return out
}

// AllocatedStatus is the health of the devices each of the pod's
// containers holds, by container (the kubelet's
// allocatedResourcesStatus): resources and devices sorted by name.
func (m *Manager) AllocatedStatus(uid types.UID) map[string][]corev1.ResourceStatus {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string][]corev1.ResourceStatus{}
	for container, as := range m.allocated[uid] {
		for _, a := range as {
			rs := corev1.ResourceStatus{Name: corev1.ResourceName(a.Resource), Resources: []corev1.ResourceHealth{}}
			var devices map[string]bool
			if p := m.plugins[a.Resource]; p != nil {
				devices = p.devices
			}
			for _, id := range slices.Sorted(slices.Values(a.Devices)) {
				h := corev1.ResourceHealthStatusHealthy
				if !healthy(devices, id) {
					h = corev1.ResourceHealthStatusUnhealthy
				}
				rs.Resources = append(rs.Resources, corev1.ResourceHealth{ResourceID: corev1.ResourceID(id), Health: h})
			}
			out[container] = append(out[container], rs)
		}
	}
	return out
}

// ContainerDevices are the device IDs the container holds, by resource.
func (m *Manager) ContainerDevices(uid types.UID, container string) map[string][]string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string][]string{}
	for _, a := range m.allocated[uid][container] {
		out[a.Resource] = append(out[a.Resource], a.Devices...)
	}
	return out
}

// AllocatableDevices are the running plugins' healthy devices, by
// resource.
func (m *Manager) AllocatableDevices() map[string][]string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string][]string{}
	for name, p := range m.plugins {
		if !p.stopped.IsZero() {
			continue
		}
		for id, ok := range p.devices {
			if ok {
				out[name] = append(out[name], id)
			}
		}
	}
	return out
}

func count(devices map[string]bool) int {
	n := 0
	for _, ok := range devices {
		if ok {
			n++
		}
	}
	return n
}

// Resources is what the plugins add to the node: capacity counts every
// device, allocatable the healthy ones of running plugins. A stopped
// plugin's resource keeps its capacity for StopGracePeriod, then stays at
// 0, as the kubelet's: it marks the resource as one a plugin serves.
func (m *Manager) Resources() (capacity, allocatable corev1.ResourceList) {
	m.mu.Lock()
	defer m.mu.Unlock()
	capacity, allocatable = corev1.ResourceList{}, corev1.ResourceList{}
	now := m.clock.Now()
	for name, p := range m.plugins {
		devices, healthy := len(p.devices), count(p.devices)
		if !p.stopped.IsZero() {
			healthy = 0
			if now.Sub(p.stopped) > StopGracePeriod {
				devices = 0
			}
		}
		capacity[corev1.ResourceName(name)] = *resource.NewQuantity(int64(devices), resource.DecimalSI)
		allocatable[corev1.ResourceName(name)] = *resource.NewQuantity(int64(healthy), resource.DecimalSI)
	}
	return capacity, allocatable
}

// Handles reports whether a plugin ever registered the resource.
func (m *Manager) Handles(name corev1.ResourceName) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.plugins[string(name)]
	return ok
}

// Allocate gives a container the devices its limits ask of the plugins'
// resources (once: a restarted container keeps its devices) and returns
// what the plugins want in its config.
func (m *Manager) Allocate(ctx context.Context, pod *corev1.Pod, c *corev1.Container) ([]*pluginapi.ContainerAllocateResponse, error) {
	m.mu.Lock()
	if have, ok := m.allocated[pod.UID][c.Name]; ok {
		m.mu.Unlock()
		return responses(have), nil
	}
	var wants []allocation
	var clients []pluginapi.DevicePluginClient
	for _, name := range slices.Sorted(maps.Keys(c.Resources.Limits)) {
		p := m.plugins[string(name)]
		if p == nil {
			continue
		}
		q := c.Resources.Limits[name]
		n := int(q.Value())
		free := m.freeLocked(p)
		if !p.stopped.IsZero() || len(free) < n {
			m.mu.Unlock()
			return nil, fmt.Errorf("requested number of devices unavailable for %s. Requested: %d, Available: %d", name, n, len(free))
		}
		wants = append(wants, allocation{Resource: string(name), Devices: free[:n]})
		clients = append(clients, p.client)
	}
	// Reserved before the calls, so two containers never get one device.
	if m.allocated[pod.UID] == nil {
		m.allocated[pod.UID] = map[string][]allocation{}
	}
	m.allocated[pod.UID][c.Name] = wants
	m.mu.Unlock()

	for i := range wants {
		callCtx, cancel := context.WithTimeout(ctx, callTimeout)
		resp, err := clients[i].Allocate(callCtx, &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: wants[i].Devices}}})
		cancel()
		if err == nil && len(resp.ContainerResponses) != 1 {
			err = fmt.Errorf("%d container responses, want 1", len(resp.ContainerResponses))
		}
		if err != nil {
			m.mu.Lock()
			delete(m.allocated[pod.UID], c.Name) // the pod's other containers keep theirs
			m.mu.Unlock()
			return nil, fmt.Errorf("allocate %s: %w", wants[i].Resource, err)
		}
		wants[i].Response = resp.ContainerResponses[0]
	}
	return responses(wants), nil
}

func responses(as []allocation) []*pluginapi.ContainerAllocateResponse {
	out := make([]*pluginapi.ContainerAllocateResponse, 0, len(as))
	for _, a := range as {
		if a.Response != nil {
			out = append(out, a.Response)
		}
	}
	return out
}

// freeLocked lists a plugin's healthy devices no container holds.
func (m *Manager) freeLocked(p *plugin) []string {
	held := map[string]bool{}
	for _, containers := range m.allocated {
		for _, as := range containers {
			for _, a := range as {
				if a.Resource == p.resource {
					for _, d := range a.Devices {
						held[d] = true
					}
				}
			}
		}
	}
	var free []string
	for _, id := range slices.Sorted(maps.Keys(p.devices)) {
		if p.devices[id] && !held[id] {
			free = append(free, id)
		}
	}
	return free
}

// Release returns a pod's devices (its containers are gone).
func (m *Manager) Release(uid types.UID) {
	m.mu.Lock()
	delete(m.allocated, uid)
	m.mu.Unlock()
}

// isExtendedResource is the API's rule (v1helper.IsExtendedResourceName):
// a prefixed name outside kubernetes.io, not requests.*, that is a valid
// quantity key once prefixed with requests.
func isExtendedResource(name string) bool {
	if !strings.Contains(name, "/") || strings.Contains(name, corev1.ResourceDefaultNamespacePrefix) ||
		strings.HasPrefix(name, corev1.DefaultResourceRequestsPrefix) {
		return false
	}
	return len(validation.IsQualifiedName(corev1.DefaultResourceRequestsPrefix+name)) == 0
}
