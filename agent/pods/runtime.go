package pods

import (
	"context"
	"errors"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"nodeagent/agent/pleg"
	"nodeagent/internal/notify"
	"nodeagent/probes"
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
	PullImage(ctx context.Context, image string, auth *runtimeapi.AuthConfig, sandboxCfg *runtimeapi.PodSandboxConfig) (string, error)
	ImageStatus(ctx context.Context, image string) (*runtimeapi.Image, error)
	// In-place resize.
	UpdateContainerResources(ctx context.Context, id string, linux *runtimeapi.LinuxContainerResources) error
	UpdatePodSandboxResources(ctx context.Context, id string, overhead, resources *runtimeapi.LinuxContainerResources) error
	ListContainerStats(ctx context.Context, filter *runtimeapi.ContainerStatsFilter) ([]*runtimeapi.ContainerStats, error)
}

// TaskDeleter is what a runtime may also do (*cri.Client on containerd):
// delete a container's task the CRI cannot remove.
type TaskDeleter interface {
	DeleteTask(ctx context.Context, id string) error
}

// removeContainer removes a container record. One whose start was cut
// off (the agent killed during StartContainer: EXITED, never started) may
// hold a task the runtime reports gone yet will not remove; that task is
// deleted through the runtime's own API where it has one, and the removal
// tried again.
func (m *Manager) removeContainer(ctx context.Context, c *runtimeapi.ContainerStatus) error {
	err := m.rt.RemoveContainer(ctx, c.Id)
	if err == nil || c.State != runtimeapi.ContainerState_CONTAINER_EXITED || c.StartedAt != 0 {
		return err
	}
	td, ok := m.rt.(TaskDeleter)
	if !ok {
		return err
	}
	if derr := td.DeleteTask(ctx, c.Id); derr != nil {
		return errors.Join(err, derr)
	}
	m.log.Info("deleted the task of a container whose start was cut off", "container_id", shortID(c.Id), "container", c.GetMetadata().GetName())
	return m.rt.RemoveContainer(ctx, c.Id)
}

// PodCache is the runtime view workers read (*pleg.Cache).
type PodCache interface {
	Get(uid types.UID) *pleg.PodRuntime
	Inspect(ctx context.Context, uid types.UID) (*pleg.PodRuntime, error)
	UIDs() []types.UID
}

// Probes is the probe manager workers report containers to and read
// results from (*probes.Manager).
type Probes interface {
	AddPod(pod *corev1.Pod)
	RemovePod(uid types.UID, forget bool)
	UpdatePod(uid types.UID, podIP string, terminating bool, containers []probes.ContainerState)
	Ready(uid types.UID, container, id string) bool
	Started(uid types.UID, container, id string) bool
	Kill(uid types.UID, container, id string) (kind probes.Kind, grace *int64, kill bool)
}

// Admitter refuses a pod for the node's state, with the kubelet's message
// ("": admit) (*eviction.Pressure).
type Admitter interface {
	Admit(pod *corev1.Pod) string
}

// Changes are what the manager hears besides source updates, queued by
// producers that must not block: pods whose runtime state changed (the
// relist) and probe results that changed.
type Changes struct {
	Runtime *notify.Set[types.UID]
	Probes  *notify.Set[ProbeChange]
}

// ProbeChange is a pod whose probe results of one kind changed.
type ProbeChange struct {
	UID  types.UID
	Kind probes.Kind
}

// Hooks runs postStart and preStop handlers (*probes.Handlers).
type Hooks interface {
	RunHook(ctx context.Context, h *corev1.LifecycleHandler, t probes.Target) error
}

// noProbes is the Probes of a manager built without one: every running
// container is started and ready, and nothing is killed.
type noProbes struct{}

func (noProbes) AddPod(*corev1.Pod)                                         {}
func (noProbes) RemovePod(types.UID, bool)                                  {}
func (noProbes) UpdatePod(types.UID, string, bool, []probes.ContainerState) {}
func (noProbes) Ready(types.UID, string, string) bool                       { return true }
func (noProbes) Started(types.UID, string, string) bool                     { return true }
func (noProbes) Kill(types.UID, string, string) (probes.Kind, *int64, bool) { return "", nil, false }

type noHooks struct{}

func (noHooks) RunHook(context.Context, *corev1.LifecycleHandler, probes.Target) error {
	return errors.New("no lifecycle hook runner configured")
}
