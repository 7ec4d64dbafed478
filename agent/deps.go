package agent

import (
	"context"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"nodeagent/agent/images"
	"nodeagent/agent/logs"
	"nodeagent/agent/pleg"
	"nodeagent/agent/pods"
	"nodeagent/agent/server"
	"nodeagent/cri"
	"nodeagent/eviction"
	"nodeagent/probes"
)

// Runtime is the container runtime as the agent's components use it: the
// CRI client at containerRuntimeEndpoint, or what Options.Runtime injects
// (the in-memory runtime of the agent's own tests).
type Runtime interface {
	pods.Runtime
	pleg.Runtime
	images.Runtime
	logs.Runtime
	eviction.RuntimeStats
	probes.Execer
	server.Streaming
	Version(ctx context.Context) (*runtimeapi.VersionResponse, error)
	Status(ctx context.Context, verbose bool) (*runtimeapi.StatusResponse, error)
	GetContainerEvents(ctx context.Context) (cri.ContainerEventStream, error)
	UpdatePodCIDR(ctx context.Context, cidrs string) error
	CgroupDriver(ctx context.Context) (string, error)
	Close() error
}

var _ Runtime = (*cri.Client)(nil)
