// Package criconfig translates a pod into the CRI's sandbox and container
// configs, as the kubelet's kuberuntime does. It decides what the runtime
// is asked for; the files a config points at (subPath binds, the hosts and
// termination message files) are made by the Host it is given, which also
// knows where the volume manager set the pod's volumes up.
package criconfig

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/cpuset"

	"nodeagent/internal/qos"
)

// Options are the node settings that shape configs.
type Options struct {
	NodeName   string // labels every object (cri.LabelManagedBy)
	NodeIP     string // status.hostIP in the downward API
	PodLogsDir string
	// MemoryCapacity and OOMRange give a container's oom_score_adj.
	MemoryCapacity int64
	OOMRange       qos.OOMScoreRange
	// Allocatable is what an unset limit reads as in resourceFieldRef.
	Allocatable      corev1.ResourceList
	EnforceCPULimits bool
	CPUPeriod        uint64
	// OOMGroupKill sets memory.oom.group on containers (cgroup v2).
	OOMGroupKill bool
	// MemoryQoS sets memory.min or memory.low (the request, under
	// TieredMemory; else 0) and, with a MemoryThrottlingFactor,
	// memory.high (cgroups.MemoryQoSHigh, towards the limit or
	// AllocatableMemory) on containers, as the kubelet's MemoryQoS gate
	// does on cgroup v2.
	MemoryQoS              bool
	TieredMemory           bool
	MemoryThrottlingFactor *float64
	AllocatableMemory      int64 // capacity less the reserved memory
	ClusterDNS             []string
	ClusterDomain          string
	ResolvConf             string // the host's resolv.conf ("": no host DNS)
	// SeccompRoot holds the localhost seccomp profiles (<root-dir>/seccomp).
	SeccompRoot string
	// RecursiveReadOnlyMounts: the runtime's default handler makes
	// read-only mounts recursively read-only (recursiveReadOnly).
	RecursiveReadOnlyMounts bool
	// CPUs is where the CPU manager's static policy runs each container
	// (nil: policy none, the runtime's default).
	CPUs CPUSets
	// Swap is memorySwap's behaviour and the node's swap.
	Swap SwapOptions
}

// CPUSets gives a container its exclusive CPUs or the shared pool
// (cpumanager.Manager).
type CPUSets interface {
	CPUs(uid types.UID, container string) (set cpuset.CPUSet, exclusive bool)
}

// Host makes what a container's mounts point at on the node.
type Host interface {
	// Volume is where the pod's volume name was set up, and whether
	// containers mount it read-only whatever their mount says.
	Volume(pod *corev1.Pod, name string) (path string, readOnly bool, err error)
	// SubPath resolves sub beneath the volume at volumePath, binds it at a
	// target of its own for the container's index-th mount and returns
	// the target.
	SubPath(pod *corev1.Pod, volume, container string, index int, volumePath, sub string) (string, error)
	// HostsFile writes the pod's managed hosts file and returns its path.
	HostsFile(pod *corev1.Pod, content []byte) (string, error)
	// TerminationMessageFile creates the file mounted at the container's
	// terminationMessagePath and returns its path.
	TerminationMessageFile(pod *corev1.Pod, container string) (string, error)
	// VolumeFile reads the file at path in the pod's volume, resolved
	// beneath it, at most limit bytes (fileKeyRef's env files).
	VolumeFile(pod *corev1.Pod, volume, path string, limit int64) ([]byte, error)
}

// Objects reads what containers' env refers to in the API server.
// Missing objects are apierrors NotFound.
type Objects interface {
	ConfigMap(ctx context.Context, namespace, name string) (*corev1.ConfigMap, error)
	Secret(ctx context.Context, namespace, name string) (*corev1.Secret, error)
	// Services are those whose variables a pod in namespace gets: the
	// namespace's with service links, and the API server's.
	Services(namespace string, links bool) ([]*corev1.Service, error)
}

// Builder builds configs for one node.
type Builder struct {
	opts    Options
	host    Host
	objects Objects // nil: no API server, no service variables
}

// New returns a builder; objects is nil when standalone.
func New(opts Options, host Host, objects Objects) *Builder {
	return &Builder{opts: opts, host: host, objects: objects}
}

// Plan is what is decided about a pod once, for all its configs.
type Plan struct {
	Pod          *corev1.Pod
	QOS          corev1.PodQOSClass
	CgroupParent string // the pod cgroup, as the runtime names parents ("": the runtime's default)
	// UserNamespace is the pod's for the sandbox and every container
	// (userns.Manager.Options); nil: the runtime's default.
	UserNamespace *runtimeapi.UserNamespace
	// ImageVolumes are the pulled images of the pod's image volumes, by
	// volume name, for the runtime to mount.
	ImageVolumes map[string]*runtimeapi.ImageSpec
}

// NewPlan plans pod with its cgroup parent.
func NewPlan(pod *corev1.Pod, cgroupParent string) *Plan {
	return &Plan{Pod: pod, QOS: qos.Class(pod), CgroupParent: cgroupParent}
}
