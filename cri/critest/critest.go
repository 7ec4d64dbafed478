// Package critest is the one fake container runtime of the unit tests: an
// in-memory CRI with sandboxes, containers and images and their states,
// every call recorded, and failures to inject. It implements what the
// pod workers, the pleg cache, image GC and log rotation ask of a runtime.
package critest

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"nodeagent/cri"
)

// Call is one CRI call the runtime received.
type Call struct {
	Op      string
	ID      string                       // the object it was about (or made)
	Sandbox *runtimeapi.PodSandboxConfig // RunPodSandbox's
	Config  *runtimeapi.ContainerConfig  // CreateContainer's
	Auth    *runtimeapi.AuthConfig       // PullImage's
	Handler string                       // RunPodSandbox's
	Timeout int64                        // StopContainer's, seconds
	// Resources are UpdateContainerResources' or UpdatePodSandboxResources'.
	Resources *runtimeapi.LinuxContainerResources
	Overhead  *runtimeapi.LinuxContainerResources // UpdatePodSandboxResources'
}

// Runtime is safe for concurrent use. Its zero value is not: use New.
type Runtime struct {
	// SandboxIP is the IP of new sandboxes (default 10.88.0.2).
	SandboxIP string
	// ImageFsMount is where ImageFsInfo says images live (default /images).
	ImageFsMount string
	// PulledSize is the size of the images PullImage stores.
	PulledSize uint64
	// Driver is the cgroup driver RuntimeConfig answers; empty: the call is
	// unimplemented.
	Driver string
	// OnPull, if set, runs at the start of each PullImage, outside the
	// runtime's lock: a test can hold a pull there.
	OnPull func()

	mu         sync.Mutex
	sandboxes  map[string]*runtimeapi.PodSandboxStatus
	containers map[string]*runtimeapi.ContainerStatus
	images     []*runtimeapi.Image
	calls      []Call
	failures   map[string][]error
	onList     func()
	ids        int
	podCIDR    string
}

// New returns an empty runtime.
func New() *Runtime {
	return &Runtime{SandboxIP: "10.88.0.2", ImageFsMount: "/images",
		sandboxes: map[string]*runtimeapi.PodSandboxStatus{}, containers: map[string]*runtimeapi.ContainerStatus{}, failures: map[string][]error{}}
}

// Fail makes the next calls of op return errs, one each, in order.
func (r *Runtime) Fail(op string, errs ...error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failures[op] = append(r.failures[op], errs...)
}

// OnNextList runs f once, inside the next ListContainers, before it lists:
// a test's step interleaved with a relist.
func (r *Runtime) OnNextList(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.onList = f
}

// Calls are the calls received, in order; with ops, only those.
func (r *Runtime) Calls(ops ...string) []Call {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Call
	for _, c := range r.calls {
		if len(ops) == 0 || slices.Contains(ops, c.Op) {
			out = append(out, c)
		}
	}
	return out
}

// Ops are the calls of ops as "Op ID" lines.
func (r *Runtime) Ops(ops ...string) []string {
	var out []string
	for _, c := range r.Calls(ops...) {
		out = append(out, c.Op+" "+c.ID)
	}
	return out
}

// ResetCalls forgets the calls received so far.
func (r *Runtime) ResetCalls() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = nil
}

// PutSandbox stores (or replaces) a sandbox.
func (r *Runtime) PutSandbox(s *runtimeapi.PodSandboxStatus) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sandboxes[s.Id] = proto.Clone(s).(*runtimeapi.PodSandboxStatus)
}

// PutContainer stores (or replaces) a container.
func (r *Runtime) PutContainer(c *runtimeapi.ContainerStatus) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.containers[c.Id] = proto.Clone(c).(*runtimeapi.ContainerStatus)
}

// DeleteContainer drops a container as if it had never been.
func (r *Runtime) DeleteContainer(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.containers, id)
}

// Container is a copy of a stored container, or nil.
func (r *Runtime) Container(id string) *runtimeapi.ContainerStatus {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c, ok := r.containers[id]; ok {
		return proto.Clone(c).(*runtimeapi.ContainerStatus)
	}
	return nil
}

// PutImage stores an image.
func (r *Runtime) PutImage(img *runtimeapi.Image) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.images = append(r.images, proto.Clone(img).(*runtimeapi.Image))
}

// record notes a call and returns the error injected for it, if any.
func (r *Runtime) record(c Call) error {
	r.calls = append(r.calls, c)
	if errs := r.failures[c.Op]; len(errs) > 0 {
		r.failures[c.Op] = errs[1:]
		return errs[0]
	}
	return nil
}

func (r *Runtime) nextID(prefix string) string {
	r.ids++
	return fmt.Sprintf("%s%d", prefix, r.ids)
}

func notFound(op, id string) error {
	return &cri.Error{Op: op, Code: codes.NotFound, Msg: id + " not found"}
}

func matches(labels, selector map[string]string) bool {
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// RunPodSandbox makes a ready sandbox with SandboxIP.
func (r *Runtime) RunPodSandbox(_ context.Context, cfg *runtimeapi.PodSandboxConfig, handler string) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.record(Call{Op: "RunPodSandbox", Sandbox: cfg, Handler: handler}); err != nil {
		return "", err
	}
	id := r.nextID("sb")
	r.calls[len(r.calls)-1].ID = id
	r.sandboxes[id] = &runtimeapi.PodSandboxStatus{Id: id, Metadata: cfg.Metadata, State: runtimeapi.PodSandboxState_SANDBOX_READY,
		CreatedAt: time.Now().UnixNano(), Network: &runtimeapi.PodSandboxNetworkStatus{Ip: r.SandboxIP}, Labels: cfg.Labels, Annotations: cfg.Annotations}
	return id, nil
}

func (r *Runtime) StopPodSandbox(_ context.Context, id string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.record(Call{Op: "StopPodSandbox", ID: id}); err != nil {
		return err
	}
	if s, ok := r.sandboxes[id]; ok {
		s.State = runtimeapi.PodSandboxState_SANDBOX_NOTREADY
	}
	return nil
}

func (r *Runtime) RemovePodSandbox(_ context.Context, id string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.record(Call{Op: "RemovePodSandbox", ID: id}); err != nil {
		return err
	}
	delete(r.sandboxes, id)
	return nil
}

func (r *Runtime) PodSandboxStatus(_ context.Context, id string) (*runtimeapi.PodSandboxStatus, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.record(Call{Op: "PodSandboxStatus", ID: id}); err != nil {
		return nil, err
	}
	s, ok := r.sandboxes[id]
	if !ok {
		return nil, notFound("PodSandboxStatus", id)
	}
	return proto.Clone(s).(*runtimeapi.PodSandboxStatus), nil
}

func (r *Runtime) ListPodSandbox(_ context.Context, filter *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.record(Call{Op: "ListPodSandbox"}); err != nil {
		return nil, err
	}
	var out []*runtimeapi.PodSandbox
	for id, s := range r.sandboxes {
		if matches(s.Labels, filter.GetLabelSelector()) {
			out = append(out, &runtimeapi.PodSandbox{Id: id, State: s.State, Labels: s.Labels, Metadata: s.Metadata, CreatedAt: s.CreatedAt})
		}
	}
	return out, nil
}

// CreateContainer makes a created container in the sandbox.
func (r *Runtime) CreateContainer(_ context.Context, sandboxID string, cfg *runtimeapi.ContainerConfig, _ *runtimeapi.PodSandboxConfig) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.record(Call{Op: "CreateContainer", Config: cfg}); err != nil {
		return "", err
	}
	id := r.nextID("c")
	r.calls[len(r.calls)-1].ID = id
	r.containers[id] = &runtimeapi.ContainerStatus{Id: id, Metadata: cfg.Metadata, State: runtimeapi.ContainerState_CONTAINER_CREATED,
		CreatedAt: time.Now().UnixNano(), Labels: cfg.Labels, Annotations: cfg.Annotations, LogPath: cfg.LogPath,
		Image: cfg.Image, ImageRef: cfg.GetImage().GetImage()}
	if l := cfg.GetLinux().GetResources(); l != nil {
		r.containers[id].Resources = &runtimeapi.ContainerResources{Linux: l}
	}
	return id, nil
}

func (r *Runtime) StartContainer(_ context.Context, id string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.record(Call{Op: "StartContainer", ID: id}); err != nil {
		return err
	}
	c, ok := r.containers[id]
	if !ok {
		return notFound("StartContainer", id)
	}
	c.State, c.StartedAt = runtimeapi.ContainerState_CONTAINER_RUNNING, time.Now().UnixNano()
	return nil
}

// StopContainer ends a running container as SIGKILL would (exit 137).
func (r *Runtime) StopContainer(_ context.Context, id string, timeout int64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.record(Call{Op: "StopContainer", ID: id, Timeout: timeout}); err != nil {
		return err
	}
	if c, ok := r.containers[id]; ok && c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
		c.State, c.ExitCode, c.FinishedAt = runtimeapi.ContainerState_CONTAINER_EXITED, 137, time.Now().UnixNano()
	}
	return nil
}

func (r *Runtime) RemoveContainer(_ context.Context, id string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.record(Call{Op: "RemoveContainer", ID: id}); err != nil {
		return err
	}
	delete(r.containers, id)
	return nil
}

// UpdateContainerResources records the update and shows it in the
// container's status, as containerd does.
func (r *Runtime) UpdateContainerResources(_ context.Context, id string, linux *runtimeapi.LinuxContainerResources) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.record(Call{Op: "UpdateContainerResources", ID: id, Resources: linux}); err != nil {
		return err
	}
	c, ok := r.containers[id]
	if !ok {
		return notFound("UpdateContainerResources", id)
	}
	c.Resources = &runtimeapi.ContainerResources{Linux: linux}
	return nil
}

// UpdatePodSandboxResources records the call.
func (r *Runtime) UpdatePodSandboxResources(_ context.Context, id string, overhead, resources *runtimeapi.LinuxContainerResources) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.record(Call{Op: "UpdatePodSandboxResources", ID: id, Resources: resources, Overhead: overhead})
}

func (r *Runtime) ContainerStatus(_ context.Context, id string) (*runtimeapi.ContainerStatus, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.record(Call{Op: "ContainerStatus", ID: id}); err != nil {
		return nil, err
	}
	c, ok := r.containers[id]
	if !ok {
		return nil, notFound("ContainerStatus", id)
	}
	return proto.Clone(c).(*runtimeapi.ContainerStatus), nil
}

func (r *Runtime) ListContainers(_ context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	r.mu.Lock()
	hook := r.onList
	r.onList = nil
	r.mu.Unlock()
	if hook != nil {
		hook()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.record(Call{Op: "ListContainers"}); err != nil {
		return nil, err
	}
	var out []*runtimeapi.Container
	for id, c := range r.containers {
		if matches(c.Labels, filter.GetLabelSelector()) {
			out = append(out, &runtimeapi.Container{Id: id, State: c.State, Labels: c.Labels, Metadata: c.Metadata, ImageRef: c.ImageRef, CreatedAt: c.CreatedAt})
		}
	}
	return out, nil
}

// ReopenContainerLog starts the container's log afresh, as the runtime
// does after the agent renamed it.
func (r *Runtime) ReopenContainerLog(_ context.Context, id string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.record(Call{Op: "ReopenContainerLog", ID: id}); err != nil {
		return err
	}
	c, ok := r.containers[id]
	if !ok {
		return notFound("ReopenContainerLog", id)
	}
	return os.WriteFile(c.LogPath, nil, 0o644)
}

// PullImage stores the image under its name as its ID.
func (r *Runtime) PullImage(_ context.Context, image string, auth *runtimeapi.AuthConfig, _ *runtimeapi.PodSandboxConfig) (string, error) {
	if r.OnPull != nil {
		r.OnPull()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.record(Call{Op: "PullImage", ID: image, Auth: auth}); err != nil {
		return "", err
	}
	for _, img := range r.images {
		if img.Id == image || slices.Contains(img.RepoTags, image) {
			return img.Id, nil
		}
	}
	r.images = append(r.images, &runtimeapi.Image{Id: image, RepoTags: []string{image}, Size: r.PulledSize})
	return image, nil
}

// ImageStatus is the image by ID or tag, or nil when absent.
func (r *Runtime) ImageStatus(_ context.Context, image string) (*runtimeapi.Image, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.record(Call{Op: "ImageStatus", ID: image}); err != nil {
		return nil, err
	}
	for _, img := range r.images {
		if img.Id == image || slices.Contains(img.RepoTags, image) {
			return proto.Clone(img).(*runtimeapi.Image), nil
		}
	}
	return nil, nil
}

func (r *Runtime) ListImages(context.Context) ([]*runtimeapi.Image, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.record(Call{Op: "ListImages"}); err != nil {
		return nil, err
	}
	out := make([]*runtimeapi.Image, len(r.images))
	for i, img := range r.images {
		out[i] = proto.Clone(img).(*runtimeapi.Image)
	}
	return out, nil
}

func (r *Runtime) RemoveImage(_ context.Context, id string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.record(Call{Op: "RemoveImage", ID: id}); err != nil {
		return err
	}
	r.images = slices.DeleteFunc(r.images, func(img *runtimeapi.Image) bool { return img.Id == id })
	return nil
}

func (r *Runtime) ImageFsInfo(context.Context) ([]*runtimeapi.FilesystemUsage, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.record(Call{Op: "ImageFsInfo"}); err != nil {
		return nil, err
	}
	return []*runtimeapi.FilesystemUsage{{FsId: &runtimeapi.FilesystemIdentifier{Mountpoint: r.ImageFsMount}}}, nil
}

// Version answers as a containerd would, naming the fake.
func (r *Runtime) Version(context.Context) (*runtimeapi.VersionResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.record(Call{Op: "Version"}); err != nil {
		return nil, err
	}
	return &runtimeapi.VersionResponse{Version: "0.1.0", RuntimeName: "critest", RuntimeVersion: "1.0", RuntimeApiVersion: "v1"}, nil
}

// Status says the runtime and its network are ready.
// UpdatePodCIDR records the pod CIDRs the runtime was told.
func (r *Runtime) UpdatePodCIDR(_ context.Context, cidrs string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.record(Call{Op: "UpdateRuntimeConfig"}); err != nil {
		return err
	}
	r.podCIDR = cidrs
	return nil
}

// PodCIDR is what UpdatePodCIDR last told the runtime.
func (r *Runtime) PodCIDR() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.podCIDR
}

func (r *Runtime) Status(context.Context, bool) (*runtimeapi.StatusResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.record(Call{Op: "Status"}); err != nil {
		return nil, err
	}
	return &runtimeapi.StatusResponse{Status: &runtimeapi.RuntimeStatus{Conditions: []*runtimeapi.RuntimeCondition{
		{Type: runtimeapi.RuntimeReady, Status: true}, {Type: runtimeapi.NetworkReady, Status: true}}}}, nil
}

// ExecSync runs nothing and exits 0.
func (r *Runtime) ExecSync(_ context.Context, id string, _ []string, _ time.Duration) (*runtimeapi.ExecSyncResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.record(Call{Op: "ExecSync", ID: id}); err != nil {
		return nil, err
	}
	return &runtimeapi.ExecSyncResponse{}, nil
}

// ListContainerStats has no statistics.
func (r *Runtime) ListContainerStats(context.Context, *runtimeapi.ContainerStatsFilter) ([]*runtimeapi.ContainerStats, error) {
	return nil, nil
}

// CgroupDriver is what Driver says; empty: unimplemented, as containerd
// 1.x answers.
func (r *Runtime) CgroupDriver(context.Context) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.record(Call{Op: "RuntimeConfig"}); err != nil {
		return "", err
	}
	if r.Driver == "" {
		return "", unimplemented("RuntimeConfig")
	}
	return r.Driver, nil
}

// GetContainerEvents is unimplemented: the pleg cache relists.
func (r *Runtime) GetContainerEvents(context.Context) (cri.ContainerEventStream, error) {
	return nil, unimplemented("GetContainerEvents")
}

// Exec, Attach and PortForward have no streaming server.
func (r *Runtime) Exec(context.Context, string, []string, cri.Streams) (string, error) {
	return "", unimplemented("Exec")
}

func (r *Runtime) Attach(context.Context, string, cri.Streams) (string, error) {
	return "", unimplemented("Attach")
}

func (r *Runtime) PortForward(context.Context, string, []int32) (string, error) {
	return "", unimplemented("PortForward")
}

// Close does nothing.
func (r *Runtime) Close() error { return nil }

func unimplemented(op string) error {
	return &cri.Error{Op: op, Code: codes.Unimplemented, Msg: "the in-memory runtime has no " + op}
}
