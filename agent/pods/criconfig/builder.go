// Package criconfig translates a pod into the CRI's sandbox and container
// configs, as the kubelet's kuberuntime does. It decides what the runtime
// is asked for; the files a config points at (volume directories, subPath
// binds, the hosts and termination message files) are made by the Host it
// is given.
package criconfig

import (
	corev1 "k8s.io/api/core/v1"

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
	OOMGroupKill  bool
	ClusterDNS    []string
	ClusterDomain string
	ResolvConf    string // the host's resolv.conf ("": no host DNS)
}

// Host makes what a container's mounts point at on the node.
type Host interface {
	// EmptyDir returns the directory of the pod's emptyDir volume v,
	// created (with a tmpfs for medium Memory).
	EmptyDir(pod *corev1.Pod, v *corev1.Volume) (string, error)
	// HostPath returns the volume's path, created when its type is
	// DirectoryOrCreate.
	HostPath(v *corev1.HostPathVolumeSource) (string, error)
	// SubPath resolves sub beneath the volume at volumePath, binds it at a
	// target of its own for the container's index-th mount and returns
	// the target.
	SubPath(pod *corev1.Pod, volume, container string, index int, volumePath, sub string) (string, error)
	// HostsFile writes the pod's managed hosts file and returns its path.
	HostsFile(pod *corev1.Pod, content []byte) (string, error)
	// TerminationMessageFile creates the file mounted at the container's
	// terminationMessagePath and returns its path.
	TerminationMessageFile(pod *corev1.Pod, container string) (string, error)
}

// Builder builds configs for one node.
type Builder struct {
	opts Options
	host Host
}

// New returns a builder.
func New(opts Options, host Host) *Builder { return &Builder{opts: opts, host: host} }

// Plan is what is decided about a pod once, for all its configs.
type Plan struct {
	Pod          *corev1.Pod
	QOS          corev1.PodQOSClass
	CgroupParent string // the pod cgroup, as the runtime names parents ("": the runtime's default)
}

// NewPlan plans pod with its cgroup parent.
func NewPlan(pod *corev1.Pod, cgroupParent string) *Plan {
	return &Plan{Pod: pod, QOS: qos.Class(pod), CgroupParent: cgroupParent}
}
