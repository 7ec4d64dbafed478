package pods

import (
	"context"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"nodeagent/agent/pleg"
)

// Runtime is the part of the CRI client pod workers drive (*cri.Client).
type Runtime interface {
	RunPodSandbox(ctx context.Context, cfg *runtimeapi.PodSandboxConfig, handler string) (string, error)
	StopPodSandbox(ctx context.Context, id string) error
	RemovePodSandbox(ctx context.Context, id string) error
	PodSandboxStatus(ctx context.Context, id string) (*runtimeapi.PodSandboxStatus, error)
	CreateContainer(ctx context.Context, sandboxID string, cfg *runtimeapi.ContainerConfig, sandboxCfg *runtimeapi.PodSandboxConfig) (string, error)
	StartContainer(ctx context.Context, id string) error
	StopContainer(ctx context.Context, id string, grace int64) error
	RemoveContainer(ctx context.Context, id string) error
	PullImage(ctx context.Context, image string, sandboxCfg *runtimeapi.PodSandboxConfig) (string, error)
	ImageStatus(ctx context.Context, image string) (*runtimeapi.Image, error)
}

// PodCache is the runtime view workers read (*pleg.Cache).
type PodCache interface {
	Get(uid types.UID) *pleg.PodRuntime
	Inspect(ctx context.Context, uid types.UID) (*pleg.PodRuntime, error)
	UIDs() []types.UID
}
