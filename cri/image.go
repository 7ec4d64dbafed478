package cri

import (
	"context"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// PullImage pulls an image, with auth when the registry needs it (nil:
// anonymously), and returns its reference (image ID).
func (c *Client) PullImage(ctx context.Context, image string, auth *runtimeapi.AuthConfig, sandboxCfg *runtimeapi.PodSandboxConfig) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, c.pullTimeout)
	defer cancel()
	resp, err := c.images.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: image}, Auth: auth, SandboxConfig: sandboxCfg})
	if err != nil {
		return "", c.classify("PullImage", err)
	}
	return resp.ImageRef, nil
}

// ImageStatus returns the image if present, nil if not.
func (c *Client) ImageStatus(ctx context.Context, image string) (*runtimeapi.Image, error) {
	ctx, cancel := c.call(ctx)
	defer cancel()
	resp, err := c.images.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: image}})
	if err != nil {
		return nil, c.classify("ImageStatus", err)
	}
	return resp.Image, nil
}

// ListImages lists the runtime's images.
func (c *Client) ListImages(ctx context.Context) ([]*runtimeapi.Image, error) {
	ctx, cancel := c.call(ctx)
	defer cancel()
	resp, err := c.images.ListImages(ctx, &runtimeapi.ListImagesRequest{})
	if err != nil {
		return nil, c.classify("ListImages", err)
	}
	return resp.Images, nil
}

// RemoveImage removes an image; a missing image is success.
func (c *Client) RemoveImage(ctx context.Context, image string) error {
	ctx, cancel := c.call(ctx)
	defer cancel()
	_, err := c.images.RemoveImage(ctx, &runtimeapi.RemoveImageRequest{Image: &runtimeapi.ImageSpec{Image: image}})
	return ignoreNotFound(c.classify("RemoveImage", err))
}

// ImageFsInfo reports the filesystems holding the runtime's images.
func (c *Client) ImageFsInfo(ctx context.Context) ([]*runtimeapi.FilesystemUsage, error) {
	ctx, cancel := c.call(ctx)
	defer cancel()
	resp, err := c.images.ImageFsInfo(ctx, &runtimeapi.ImageFsInfoRequest{})
	if err != nil {
		return nil, c.classify("ImageFsInfo", err)
	}
	return resp.ImageFilesystems, nil
}
