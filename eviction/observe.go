package eviction

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"nodeagent/cgroups"
	"nodeagent/internal/fsinfo"
	"nodeagent/internal/layout"
)

// Observation is one reading of a signal.
type Observation struct {
	Available int64
	Capacity  int64
	Time      time.Time
}

// Observations are the latest readings, by signal. A signal without a
// reading is missing, and the agent never acts on it.
type Observations map[Signal]Observation

// NodeSource reads the node-level signals.
type NodeSource interface {
	Observe(ctx context.Context) (Observations, error)
}

// ImageFs tells where the runtime keeps its images (the CRI's
// ImageFsInfo mountpoint); "" when unknown.
type ImageFs func(ctx context.Context) (string, error)

// HostSource reads the signals from the host: the root and kubepods
// memory cgroups (usage − inactive_file, as the kubelet), statfs of the
// agent's root directory (nodefs) and of the runtime's image filesystem
// (imagefs), and the kernel's task count against pid_max.
type HostSource struct {
	Cgroups           cgroups.Manager
	Kubepods          cgroups.Name
	MemoryCapacity    int64
	MemoryAllocatable int64
	NodeFsPath        string
	ImageFs           ImageFs
	// PIDMax is the node's PID capacity: min(pid_max, threads-max), as
	// the machine facts have it.
	PIDMax int64
	Now    func() time.Time
	// Memcg, on cgroup v1, gets a usage line for each memory threshold
	// after every observation (the line moves with inactive_file), and an
	// OOM notification on kubepods.
	Memcg *MemcgThresholds
	// Tripwires, on cgroup v2, get kubepods' lowest allocatable usage line
	// as memory.high (v2 has no usage thresholds; the root has no
	// memory.high, so memory.available is polled there).
	Tripwires  *Tripwires
	Thresholds []Threshold

	imageFsMount string // learned from ImageFs on the first answer
	arms         []func() error
}

// Arm sets the kernel notifications the last Observe computed: memcg
// thresholds and kubepods' OOM notification (v1), the memory.high
// tripwire (v2). It is separate because registering a memcg threshold
// waits for an RCU grace period, tens of milliseconds on a busy node: the
// eviction manager arms after it has decided and acted.
func (h *HostSource) Arm() error {
	arms := h.arms
	h.arms = nil
	var errs []error
	for _, arm := range arms {
		if err := arm(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Observe implements NodeSource. Errors on one signal leave it missing and
// are returned joined; the other signals are still observed. The
// notifications the readings call for are left to Arm.
func (h *HostSource) Observe(ctx context.Context) (Observations, error) {
	obs := Observations{}
	var errs []error
	h.arms = h.arms[:0]
	now := h.Now()
	for _, m := range []struct {
		signal   Signal
		name     cgroups.Name
		capacity int64
	}{{MemoryAvailable, cgroups.Name{}, h.MemoryCapacity}, {AllocatableMemoryAvailable, h.Kubepods, h.MemoryAllocatable}} {
		st, err := cgroups.ReadMemoryStats(h.Cgroups, m.name)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", m.signal, err))
			continue
		}
		obs[m.signal] = Observation{Available: m.capacity - int64(st.WorkingSet()), Capacity: m.capacity, Time: now}
		if h.Tripwires != nil && cgroups.FeaturesOf(h.Cgroups).MemoryHigh && m.signal == AllocatableMemoryAvailable {
			var lowest int64
			for _, t := range h.Thresholds {
				if t.Signal == m.signal {
					if line := usageLine(m.capacity, t.Value.Of(m.capacity), int64(st.InactiveFile)); lowest == 0 || line < lowest {
						lowest = line
					}
				}
			}
			if lowest > 0 {
				dir, signal := h.Cgroups.Path(m.name), m.signal
				h.arms = append(h.arms, func() error {
					if err := h.Tripwires.Arm(dir, lowest); err != nil {
						return fmt.Errorf("%s tripwire: %w", signal, err)
					}
					return nil
				})
			}
		}
		if h.Memcg != nil && cgroups.FeaturesOf(h.Cgroups).MemoryThresholds {
			dir := h.Cgroups.Path(m.name)
			if m.signal == AllocatableMemoryAvailable {
				h.arms = append(h.arms, func() error {
					if err := h.Memcg.ArmOOM("oom", dir); err != nil {
						return fmt.Errorf("kubepods OOM notification: %w", err)
					}
					return nil
				})
			}
			for _, t := range h.Thresholds {
				if t.Signal != m.signal {
					continue
				}
				line := usageLine(m.capacity, t.Value.Of(m.capacity), int64(st.InactiveFile))
				h.arms = append(h.arms, func() error {
					if err := h.Memcg.Arm(key(t), dir, line, int64(st.Usage)); err != nil {
						return fmt.Errorf("%s: %w", t, err)
					}
					return nil
				})
			}
		}
	}
	if h.NodeFsPath != "" {
		if err := statfs(obs, h.NodeFsPath, NodeFsAvailable, NodeFsInodesFree, now); err != nil {
			errs = append(errs, err)
		}
	}
	if h.ImageFs != nil && h.imageFsMount == "" {
		// Where the runtime keeps its images does not move: asked once
		// (until it answers), not at every observation.
		mount, err := h.ImageFs(ctx)
		if err != nil {
			errs = append(errs, fmt.Errorf("imagefs: %w", err))
		}
		h.imageFsMount = mount
	}
	if h.imageFsMount != "" {
		if err := statfs(obs, h.imageFsMount, ImageFsAvailable, ImageFsInodesFree, now); err != nil {
			errs = append(errs, fmt.Errorf("imagefs: %w", err))
		}
	}
	if h.PIDMax > 0 {
		var si unix.Sysinfo_t
		if err := unix.Sysinfo(&si); err == nil {
			obs[PIDAvailable] = Observation{Available: h.PIDMax - int64(si.Procs), Capacity: h.PIDMax, Time: now}
		} else {
			errs = append(errs, fmt.Errorf("pid.available: %w", err))
		}
	}
	return obs, errors.Join(errs...)
}

func statfs(obs Observations, path string, bytes, inodes Signal, now time.Time) error {
	u, err := fsinfo.Stat(path)
	if err != nil {
		return err
	}
	obs[bytes] = Observation{Available: int64(u.Available), Capacity: int64(u.Capacity), Time: now}
	if u.Inodes > 0 {
		obs[inodes] = Observation{Available: int64(u.InodesFree), Capacity: int64(u.Inodes), Time: now}
	}
	return nil
}

// HostUsage reads pods' usage on the host: memory from their pod cgroups,
// per-container memory and process counts from the containers' cgroups
// (not through cadvisor: they are read between a decision and its kill),
// disk from
// their emptyDir volumes and log directories, and writable layers from the
// runtime's container stats.
type HostUsage struct {
	Tree    *cgroups.Tree
	RootDir string // emptyDirs under <RootDir>/pods/<uid>/volumes
	LogsDir string // logs under <LogsDir>/<ns>_<name>_<uid>
	// ContainerNames maps the pod's container IDs to container names.
	ContainerNames func(uid types.UID) map[string]string
	// WritableLayers gives the pod's containers' writable layers (the
	// CRI's container stats); nil: not counted.
	WritableLayers func(uid types.UID) (bytes, inodes int64, err error)
	// ContainerLayers gives each container's writable layer in bytes, by
	// container name; nil: not counted.
	ContainerLayers func(uid types.UID) (map[string]int64, error)
	// ImageFsShared is true when the images and writable layers live on
	// the node filesystem, which then counts them, as the kubelet does.
	ImageFsShared bool
}

// Memory implements PodUsage: the pod cgroup's working set.
func (u HostUsage) Memory(pod *corev1.Pod) (int64, bool) {
	name, ok := u.Tree.PodCgroup(pod)
	if !ok {
		return 0, false
	}
	st, err := u.Tree.MemoryStats(name)
	if err != nil {
		return 0, false
	}
	return int64(st.WorkingSet()), true
}

// Containers implements PodUsage: each container's working set and
// process count, by container name.
func (u HostUsage) Containers(pod *corev1.Pod) map[string]ContainerUsage {
	name, ok := u.Tree.PodCgroup(pod)
	if !ok || u.ContainerNames == nil {
		return nil
	}
	names := u.ContainerNames(pod.UID)
	entries, err := os.ReadDir(u.Tree.Dir(name))
	if err != nil {
		return nil
	}
	out := map[string]ContainerUsage{}
	for _, e := range entries {
		container, ok := names[cgroups.ContainerIDOf(e.Name())]
		if !e.IsDir() || !ok {
			continue // the sandbox, or not a container's cgroup
		}
		cg := name.Child(e.Name())
		st, err := u.Tree.MemoryStats(cg)
		if err != nil {
			continue
		}
		pids, err := u.Tree.Pids(cg)
		if err != nil {
			continue
		}
		out[container] = ContainerUsage{WorkingSet: int64(st.WorkingSet()), Processes: int64(len(pids))}
	}
	return out
}

// Disk implements PodUsage: bytes and inodes of the pod's volumes and logs,
// and of its writable layers when they share the node filesystem.
func (u HostUsage) Disk(pod *corev1.Pod) (bytes, inodes int64, ok bool) {
	for _, dir := range []string{
		layout.Root(u.RootDir).Volumes(pod.UID),
		layout.Logs(u.LogsDir).Pod(pod.Namespace, pod.Name, pod.UID),
	} {
		b, i, err := fsinfo.DirUsage(dir)
		if err != nil {
			return 0, 0, false
		}
		bytes, inodes = bytes+b, inodes+i
	}
	if u.ImageFsShared && u.WritableLayers != nil {
		b, i, err := u.WritableLayers(pod.UID)
		if err != nil {
			return 0, 0, false
		}
		bytes, inodes = bytes+b, inodes+i
	}
	return bytes, inodes, true
}

// ImageFs implements PodUsage: the pod's writable layers.
func (u HostUsage) ImageFs(pod *corev1.Pod) (bytes, inodes int64, ok bool) {
	if u.WritableLayers == nil {
		return 0, 0, false
	}
	b, i, err := u.WritableLayers(pod.UID)
	return b, i, err == nil
}

// ContainerDisk implements PodUsage: each container's log directory and,
// when writable layers share the node filesystem, its writable layer (the
// kubelet's containerEphemeralStorageLimitEviction).
func (u HostUsage) ContainerDisk(pod *corev1.Pod) (map[string]int64, bool) {
	out := map[string]int64{}
	logs := layout.Logs(u.LogsDir)
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range cs {
			b, _, err := fsinfo.DirUsage(logs.Container(pod.Namespace, pod.Name, pod.UID, c.Name))
			if err != nil {
				return nil, false
			}
			out[c.Name] = b
		}
	}
	if u.ImageFsShared && u.ContainerLayers != nil {
		layers, err := u.ContainerLayers(pod.UID)
		if err != nil {
			return nil, false
		}
		for name, b := range layers {
			out[name] += b
		}
	}
	return out, true
}

// EmptyDir implements PodUsage: the bytes a disk emptyDir volume holds.
func (u HostUsage) EmptyDir(pod *corev1.Pod, volume string) (int64, error) {
	b, _, err := fsinfo.DirUsage(layout.Root(u.RootDir).EmptyDir(pod.UID, volume))
	return b, err
}
