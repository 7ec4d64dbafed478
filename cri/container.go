package cri

import (
	"context"
	"errors"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"nodeagent/internal/sat"
)

// CreateContainer creates a container in a sandbox and returns its ID.
func (c *Client) CreateContainer(ctx context.Context, sandboxID string, cfg *runtimeapi.ContainerConfig, sandboxCfg *runtimeapi.PodSandboxConfig) (string, error) {
	ctx, cancel := c.call(ctx)
	defer cancel()
	resp, err := c.runtime.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sandboxID, Config: cfg, SandboxConfig: sandboxCfg})
	if err != nil {
		return "", c.classify("CreateContainer", err)
	}
	return resp.ContainerId, nil
}

// StartContainer starts a created container.
func (c *Client) StartContainer(ctx context.Context, id string) error {
	ctx, cancel := c.call(ctx)
	defer cancel()
	_, err := c.runtime.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: id})
	return c.classify("StartContainer", err)
}

// StopContainer sends the stop signal, then SIGKILL after grace seconds. The
// call's deadline is the grace period plus the usual timeout. A missing
// container is success.
func (c *Client) StopContainer(ctx context.Context, id string, grace int64) error {
	// The runtime turns the timeout into a Duration too: send no more
	// than one can hold, and wait that long plus the call's own deadline.
	grace = min(grace, sat.MaxSeconds)
	ctx, cancel := context.WithTimeout(ctx, time.Duration(sat.Add(int64(c.timeout), int64(sat.Seconds(grace)))))
	defer cancel()
	_, err := c.runtime.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: id, Timeout: grace})
	return ignoreNotFound(c.classify("StopContainer", err))
}

// RemoveContainer removes a container; a missing container is success.
func (c *Client) RemoveContainer(ctx context.Context, id string) error {
	ctx, cancel := c.call(ctx)
	defer cancel()
	_, err := c.runtime.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: id})
	return ignoreNotFound(c.classify("RemoveContainer", err))
}

// ListContainers lists containers matching filter (nil: all).
func (c *Client) ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	ctx, cancel := c.call(ctx)
	defer cancel()
	resp, err := c.runtime.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: filter})
	if err != nil {
		return nil, c.classify("ListContainers", err)
	}
	return resp.Containers, nil
}

// ListContainerStats returns the runtime's stats of the containers
// matching filter (nil: all): CPU, memory and the writable layer.
func (c *Client) ListContainerStats(ctx context.Context, filter *runtimeapi.ContainerStatsFilter) ([]*runtimeapi.ContainerStats, error) {
	ctx, cancel := c.call(ctx)
	defer cancel()
	resp, err := c.runtime.ListContainerStats(ctx, &runtimeapi.ListContainerStatsRequest{Filter: filter})
	if err != nil {
		return nil, c.classify("ListContainerStats", err)
	}
	return resp.Stats, nil
}

// ContainerStatus returns a container's full status (exit code, reason,
// start and finish times).
func (c *Client) ContainerStatus(ctx context.Context, id string) (*runtimeapi.ContainerStatus, error) {
	ctx, cancel := c.call(ctx)
	defer cancel()
	resp, err := c.runtime.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id})
	if err != nil {
		return nil, c.classify("ContainerStatus", err)
	}
	return resp.Status, nil
}

// ExecSync runs cmd in a container and waits for it, up to timeout (0: no
// limit beyond the client's).
func (c *Client) ExecSync(ctx context.Context, id string, cmd []string, timeout time.Duration) (*runtimeapi.ExecSyncResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout+timeout)
	defer cancel()
	resp, err := c.runtime.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: id, Cmd: cmd, Timeout: int64(timeout / time.Second)})
	err = c.classify("ExecSync", err)
	// containerd answers its own timeout with code Unknown and "timeout
	// ... exceeded": make it a deadline, as the client's own would be.
	var e *Error
	if timeout > 0 && errors.As(err, &e) && e.Code == codes.Unknown && strings.Contains(e.Msg, "timeout") && strings.Contains(e.Msg, "exceeded") {
		e.Code = codes.DeadlineExceeded
	}
	return resp, err
}

// ReopenContainerLog makes the runtime reopen a container's log file, after
// the agent renamed it away for rotation.
func (c *Client) ReopenContainerLog(ctx context.Context, id string) error {
	ctx, cancel := c.call(ctx)
	defer cancel()
	_, err := c.runtime.ReopenContainerLog(ctx, &runtimeapi.ReopenContainerLogRequest{ContainerId: id})
	return c.classify("ReopenContainerLog", err)
}

// ContainerEventStream is a runtime's stream of container events.
type ContainerEventStream interface {
	Recv() (*runtimeapi.ContainerEventResponse, error)
}

// GetContainerEvents opens the runtime's container event stream; it lives
// until ctx ends. Runtimes without it answer with an error that
// IsUnimplemented recognises.
func (c *Client) GetContainerEvents(ctx context.Context) (ContainerEventStream, error) {
	s, err := c.runtime.GetContainerEvents(ctx, &runtimeapi.GetEventsRequest{})
	if err != nil {
		return nil, c.classify("GetContainerEvents", err)
	}
	return streamClassifier{s, c}, nil
}

type streamClassifier struct {
	s runtimeapi.RuntimeService_GetContainerEventsClient
	c *Client
}

func (s streamClassifier) Recv() (*runtimeapi.ContainerEventResponse, error) {
	ev, err := s.s.Recv()
	return ev, s.c.classify("GetContainerEvents", err)
}

// Streams are the standard streams a streaming session carries. With a
// TTY, stderr is merged into stdout (the runtime refuses both).
type Streams struct {
	Stdin, Stdout, Stderr, TTY bool
}

// Exec prepares a streaming exec session in a container and returns the
// runtime's URL to attach to (the runtime's streaming server).
func (c *Client) Exec(ctx context.Context, id string, cmd []string, s Streams) (string, error) {
	ctx, cancel := c.call(ctx)
	defer cancel()
	resp, err := c.runtime.Exec(ctx, &runtimeapi.ExecRequest{ContainerId: id, Cmd: cmd, Tty: s.TTY, Stdin: s.Stdin, Stdout: s.Stdout, Stderr: s.Stderr && !s.TTY})
	if err != nil {
		return "", c.classify("Exec", err)
	}
	return resp.Url, nil
}

// Attach prepares a streaming session on a running container's own
// streams and returns the runtime's URL for it.
func (c *Client) Attach(ctx context.Context, id string, s Streams) (string, error) {
	ctx, cancel := c.call(ctx)
	defer cancel()
	resp, err := c.runtime.Attach(ctx, &runtimeapi.AttachRequest{ContainerId: id, Tty: s.TTY, Stdin: s.Stdin, Stdout: s.Stdout, Stderr: s.Stderr && !s.TTY})
	if err != nil {
		return "", c.classify("Attach", err)
	}
	return resp.Url, nil
}

// PortForward prepares a port-forwarding session into a pod's network
// namespace and returns the runtime's URL for it.
func (c *Client) PortForward(ctx context.Context, sandboxID string, ports []int32) (string, error) {
	ctx, cancel := c.call(ctx)
	defer cancel()
	resp, err := c.runtime.PortForward(ctx, &runtimeapi.PortForwardRequest{PodSandboxId: sandboxID, Port: ports})
	if err != nil {
		return "", c.classify("PortForward", err)
	}
	return resp.Url, nil
}

// UpdateContainerResources changes a running container's cgroup values
// (an in-place resize).
func (c *Client) UpdateContainerResources(ctx context.Context, id string, linux *runtimeapi.LinuxContainerResources) error {
	ctx, cancel := c.call(ctx)
	defer cancel()
	_, err := c.runtime.UpdateContainerResources(ctx, &runtimeapi.UpdateContainerResourcesRequest{ContainerId: id, Linux: linux})
	return c.classify("UpdateContainerResources", err)
}
