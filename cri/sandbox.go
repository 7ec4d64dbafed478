package cri

import (
	"context"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// RunPodSandbox creates and starts a pod sandbox (pause container, network
// namespace, CNI ADD) and returns its ID.
func (c *Client) RunPodSandbox(ctx context.Context, cfg *runtimeapi.PodSandboxConfig, handler string) (string, error) {
	ctx, cancel := c.call(ctx)
	defer cancel()
	resp, err := c.runtime.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: cfg, RuntimeHandler: handler})
	if err != nil {
		return "", c.classify("RunPodSandbox", err)
	}
	return resp.PodSandboxId, nil
}

// StopPodSandbox stops the sandbox and tears down its network; a missing
// sandbox is success.
func (c *Client) StopPodSandbox(ctx context.Context, id string) error {
	ctx, cancel := c.call(ctx)
	defer cancel()
	_, err := c.runtime.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: id})
	return ignoreNotFound(c.classify("StopPodSandbox", err))
}

// RemovePodSandbox removes the sandbox and its containers; a missing sandbox
// is success.
func (c *Client) RemovePodSandbox(ctx context.Context, id string) error {
	ctx, cancel := c.call(ctx)
	defer cancel()
	_, err := c.runtime.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: id})
	return ignoreNotFound(c.classify("RemovePodSandbox", err))
}

// PodSandboxStatus returns the sandbox's state and network.
func (c *Client) PodSandboxStatus(ctx context.Context, id string) (*runtimeapi.PodSandboxStatus, error) {
	ctx, cancel := c.call(ctx)
	defer cancel()
	resp, err := c.runtime.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: id})
	if err != nil {
		return nil, c.classify("PodSandboxStatus", err)
	}
	return resp.Status, nil
}

// ListPodSandbox lists sandboxes matching filter (nil: all).
func (c *Client) ListPodSandbox(ctx context.Context, filter *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	ctx, cancel := c.call(ctx)
	defer cancel()
	resp, err := c.runtime.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: filter})
	if err != nil {
		return nil, c.classify("ListPodSandbox", err)
	}
	return resp.Items, nil
}

// UpdatePodSandboxResources tells the runtime a pod's resources change
// before its cgroup does (an in-place resize). A runtime without the call
// (containerd before 2.1) answers Unimplemented, which callers ignore, as
// the kubelet does.
func (c *Client) UpdatePodSandboxResources(ctx context.Context, id string, overhead, resources *runtimeapi.LinuxContainerResources) error {
	ctx, cancel := c.call(ctx)
	defer cancel()
	_, err := c.runtime.UpdatePodSandboxResources(ctx, &runtimeapi.UpdatePodSandboxResourcesRequest{PodSandboxId: id, Overhead: overhead, Resources: resources})
	return c.classify("UpdatePodSandboxResources", err)
}
