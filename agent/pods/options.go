package pods

import (
	"context"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	"k8s.io/utils/clock"

	"nodeagent/agent/events"
	"nodeagent/agent/images/pullrecords"
	"nodeagent/agent/pods/criconfig"
	"nodeagent/agent/status"
	"nodeagent/agent/volumes"
	"nodeagent/cgroups"
	"nodeagent/internal/qos"
)

// Options are the node settings that shape pods.
type Options struct {
	NodeName         string
	NodeIP           string
	RuntimeName      string // containerID scheme in statuses, e.g. "containerd"
	PodLogsDir       string
	RootDir          string // emptyDir volumes live under <RootDir>/pods/<uid>
	MaxPods          int
	Allocatable      corev1.ResourceList // for admission
	MemoryCapacity   int64               // for Burstable oom_score_adj
	OOMRange         qos.OOMScoreRange
	EnforceCPULimits bool
	CPUPeriod        uint64
	ClusterDNS       []string
	ClusterDomain    string
	ResolvConf       string
	// ResyncPeriod bounds how long a worker sleeps without a runtime event.
	ResyncPeriod time.Duration
	// ReconcilePeriod is how often the whole cgroup tree is rewritten.
	ReconcilePeriod time.Duration
	// Sources name the sources whose first update completes the sync:
	// only then are pods nobody wants collected. Empty: any first update.
	Sources []string
	// MaxRestartBackOff caps the crash-loop back-off (0: the kubelet's 300 s).
	MaxRestartBackOff time.Duration
	// SerializeImagePulls pulls one image at a time.
	SerializeImagePulls bool
	// OOMGroupKill sets memory.oom.group on containers (cgroup v2, unless
	// singleProcessOOMKill): the kernel OOM killer then ends the whole
	// container, as the kubelet arranges.
	OOMGroupKill bool
	// MemoryQoS, with TieredMemory, MemoryThrottlingFactor and
	// AllocatableMemory, sets memory.min, memory.low and memory.high on
	// containers (criconfig.Options).
	MemoryQoS              bool
	TieredMemory           bool
	MemoryThrottlingFactor *float64
	AllocatableMemory      int64
	// AppArmor: the host enforces AppArmor; without it, pods asking for a
	// profile are refused.
	AppArmor bool
	// ContainerLogLinks is where each container's log gets a link, as the
	// kubelet's /var/log/containers ("": none).
	ContainerLogLinks string
	// RecursiveReadOnlyMounts: the runtime's default handler can make
	// read-only mounts recursively so (recursiveReadOnly).
	RecursiveReadOnlyMounts bool
	// Swap is memorySwap's behaviour and the node's swap.
	Swap criconfig.SwapOptions
	// StrictSupplementalGroups: the runtime takes supplementalGroupsPolicy
	// Strict; without it such pods are refused.
	StrictSupplementalGroups bool
	// AllowedUnsafeSysctls are the sysctls (or prefixes, ending in *) pods
	// may set beyond the safe ones.
	AllowedUnsafeSysctls []string
	// DeclaredFeatures are the node's status.declaredFeatures: a pod that
	// needs another is refused (PodFeatureUnsupported).
	DeclaredFeatures []string
	// VolumeContentLimit bounds what a pod's configMap, secret,
	// downwardAPI and projected volumes hold together (0: the default).
	VolumeContentLimit int64
}

// Devices is the device plugin manager (devices.Manager).
type Devices interface {
	Resources() (capacity, allocatable corev1.ResourceList)
	Allocate(ctx context.Context, pod *corev1.Pod, c *corev1.Container) ([]*pluginapi.ContainerAllocateResponse, error)
	AllocatedStatus(uid types.UID) map[string][]corev1.ResourceStatus
	Release(uid types.UID)
}

// Deps are the manager's collaborators.
type Deps struct {
	Runtime Runtime
	Cache   PodCache
	Tree    *cgroups.Tree
	Store   *status.Store
	Events  *events.Recorder
	Clock   clock.WithTicker
	Log     *slog.Logger
	// NetworkReady says why the runtime's pod network is not ready (nil:
	// ready); nil means always ready.
	NetworkReady func() error
	// Probes runs the pods' probes; nil: containers are ready once running.
	Probes Probes
	// Hooks runs postStart and preStop handlers; nil: pods with hooks fail
	// them.
	Hooks Hooks
	// Pressure refuses pods while the node is under pressure; nil admits.
	Pressure Admitter
	// Changes bring runtime and probe changes to the manager's loop (nil
	// sets: none come).
	Changes Changes
	// PodStarted, if set, is told when a pod this agent started first has
	// all its containers running: the time since the agent first saw it,
	// and that time less image pulls and init containers (the kubelet's
	// pod start SLI).
	PodStarted func(total, sli time.Duration)
	// PodSynced, if set, is told how long each pass of a pod worker took,
	// by the kubelet's operation type: create (the first), update (a new
	// spec), sync, kill (termination).
	PodSynced func(operation string, took time.Duration)
	// Preempted, if set, is told of each pod stopped to admit a critical
	// pod, with the first resource it lacked (kubelet_preemptions).
	Preempted func(signal string)
	// ShuttingDown, if set, says the node is shutting down: new pods are
	// refused (NodeShutdown).
	ShuttingDown func() bool
	// SandboxCreated, if set, is told of each sandbox the agent tries to
	// create: whether the pod has a user namespace, whether the sandbox
	// failed, and whether anything of that sync failed (the kubelet's
	// started_pods and started_user_namespaced_pods counters).
	SandboxCreated func(userNamespaced, sandboxFailed, syncFailed bool)
	// Gone, if set, is told when a pod that left its source or is being
	// deleted has nothing left on the node (containers, sandboxes, cgroup,
	// volumes): the API server's pod may then be deleted.
	Gone func(pod *corev1.Pod)
	// Objects reads what API pods reference in the API server (configMaps,
	// secrets, tokens, services, runtime classes); nil when standalone.
	Objects Objects
	// Devices allocates device plugins' resources (nil: none).
	Devices Devices
	// CPUs is the CPU manager's static policy (nil: none).
	CPUs CPUs
	// UserNamespaces gives pods with hostUsers: false a range of host IDs
	// (nil: such pods are refused).
	UserNamespaces UserNamespaces
	// PullRecords decides whether a pod may use an image already on the
	// node (nil: any pod may, as NeverVerify).
	PullRecords PullRecords
	// KillPod SIGKILLs every process of a pod through its cgroup and
	// returns how many it signalled: StopOptions.KillNow (nil: the worker
	// stops the pod, with its grace period).
	KillPod func(pod *corev1.Pod) (int, error)
}

// PullRecords remember which credentials pulled each image
// (*pullrecords.Store).
type PullRecords interface {
	// Pulling records a pull under way; done records its outcome.
	Pulling(image string) (done func(imageRef string, used *pullrecords.Secret, err error), err error)
	// MayUse reports whether a pod with podSecrets may use imageRef.
	MayUse(image, imageRef string, podSecrets []pullrecords.Secret) (bool, error)
}

// UserNamespaces hands out pods' user namespaces (*userns.Manager).
type UserNamespaces interface {
	// Options is the pod's user namespace for the runtime handler, its
	// range made on first use.
	Options(pod *corev1.Pod, handler string) (*runtimeapi.UserNamespace, error)
	// Release gives a pod's range back once nothing of it runs.
	Release(uid types.UID)
}

// Objects reads what pods reference in the API server.
type Objects interface {
	criconfig.Objects
	volumes.Objects
	// RuntimeHandler resolves a runtime class to its CRI handler.
	RuntimeHandler(ctx context.Context, class string) (string, error)
}
