package cgroups

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"nodeagent/api"
	"nodeagent/internal/qos"
)

// TreeConfig describes the node's cgroup layout and the node-wide values.
type TreeConfig struct {
	Root        Name            // cgroupRoot, {} for "/"
	PerQOS      bool            // cgroupsPerQOS: kubepods, QoS and pod cgroups
	Pod         PodOptions      // values for pod cgroups
	Allocatable *ResourceConfig // kubepods values (NodeAllocatableConfig)
	// MemoryReserve is qosReserved's memory percentage (QOSReservedMemory);
	// nil leaves the QoS cgroups' memory alone.
	MemoryReserve *int64
	// MemoryProtection is what memory QoS writes on kubepods and the
	// burstable cgroup (QoSMemoryProtection).
	MemoryProtection MemoryProtection
}

// Tree lays out and keeps correct the QoS cgroup tree. Methods are safe for
// concurrent use; QoS-level writes are serialized.
type Tree struct {
	mgr    Manager
	cfg    TreeConfig
	mu     sync.Mutex
	qosErr error // the last QoS-level write's failure, for Healthy
}

// NewTree returns a Tree that writes through mgr.
func NewTree(mgr Manager, cfg TreeConfig) *Tree { return &Tree{mgr: mgr, cfg: cfg} }

// Dir is the directory of a cgroup of the tree (the memory hierarchy's
// on cgroup v1).
func (t *Tree) Dir(name Name) string { return t.mgr.Path(name) }

// Version is the cgroup version the tree is on (1 or 2).
func (t *Tree) Version() int { return t.mgr.Version() }

// CadvisorName is the name cadvisor gives the cgroup at dir, a directory
// of the tree (Dir, or one below it).
func (t *Tree) CadvisorName(dir string) string { return CadvisorName(t.mgr, dir) }

// MemoryStats reads a cgroup's memory use.
func (t *Tree) MemoryStats(name Name) (MemoryStats, error) { return ReadMemoryStats(t.mgr, name) }

// CPUUsage is the cumulative CPU time, in ns, of the cgroup cadvisor
// names name.
func (t *Tree) CPUUsage(name string) (uint64, error) { return CPUUsage(t.mgr, name) }

// KillPod SIGKILLs every process in the pod's cgroup (see Kill); a pod
// without one (cgroupsPerQOS off) is an error.
func (t *Tree) KillPod(pod *corev1.Pod) (int, error) {
	name, ok := t.PodCgroup(pod)
	if !ok {
		return 0, fmt.Errorf("pod %s/%s has no pod cgroup (cgroupsPerQOS is off)", pod.Namespace, pod.Name)
	}
	return t.kill(name)
}

// kill is Kill of the cgroup name, frozen meanwhile where a v1 freezer
// hierarchy holds it.
func (t *Tree) kill(name Name) (int, error) {
	var freezer string
	if f, ok := t.mgr.(interface{ FreezerPath(Name) string }); ok {
		freezer = f.FreezerPath(name)
	}
	return Kill(t.mgr.Path(name), freezer)
}

// Pids lists the processes in a cgroup.
func (t *Tree) Pids(name Name) ([]int, error) { return t.mgr.Pids(name) }

// Kubepods is the node-allocatable cgroup, parent of every pod.
func (t *Tree) Kubepods() Name {
	if !t.cfg.PerQOS {
		return t.cfg.Root
	}
	return t.cfg.Root.Child("kubepods")
}

// QoSParent is where pods of a class live: Guaranteed pods directly under
// kubepods, the others under kubepods/<class>.
func (t *Tree) QoSParent(class corev1.PodQOSClass) Name {
	if class == corev1.PodQOSGuaranteed {
		return t.Kubepods()
	}
	return t.Kubepods().Child(strings.ToLower(string(class)))
}

// PodCgroup is the pod's own cgroup; ok is false when cgroupsPerQOS is off
// (the runtime then places containers itself).
func (t *Tree) PodCgroup(pod *corev1.Pod) (name Name, ok bool) {
	if !t.cfg.PerQOS {
		return nil, false
	}
	return t.QoSParent(qos.Class(pod)).Child("pod" + string(pod.UID)), true
}

// Sync writes the whole tree: kubepods with the node allocatable limits, the
// burstable and besteffort cgroups with values for the active pods, and
// the values of every active pod's cgroup that exists. It is the periodic
// reconcile; errors are joined so one bad cgroup does not stop the rest.
// Pod cgroups are created by their pod's worker only (EnsurePod): active
// is a snapshot, and a pod in it may be terminating and removing its
// cgroup at this moment.
func (t *Tree) Sync(active []*corev1.Pod) error { return t.SyncExcept(active, nil) }

// SyncExcept is Sync leaving alone the pod cgroups skip names: those an
// in-place resize is changing, in its own order and only as far as the
// pod's use allows.
func (t *Tree) SyncExcept(active []*corev1.Pod, skip func(types.UID) bool) error {
	if !t.cfg.PerQOS {
		return nil
	}
	var errs []error
	if err := t.syncQoS(active); err != nil {
		errs = append(errs, err)
	}
	for _, p := range active {
		if skip != nil && skip(p.UID) {
			continue
		}
		name, _ := t.PodCgroup(p)
		err := t.mgr.Update(name, PodConfig(p, t.cfg.Pod))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("pod %s/%s: %w", p.Namespace, p.Name, err))
		}
	}
	return errors.Join(errs...)
}

// SyncQoS writes kubepods and the QoS cgroups only.
func (t *Tree) SyncQoS(active []*corev1.Pod) error {
	if !t.cfg.PerQOS {
		return nil
	}
	return t.syncQoS(active)
}

func (t *Tree) syncQoS(active []*corev1.Pod) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	var burstable []*corev1.Pod
	for _, p := range active {
		if qos.Class(p) == corev1.PodQOSBurstable {
			burstable = append(burstable, p)
		}
	}
	var errs []error
	kubepodsCfg, burstableCfg, bestEffortCfg := t.cfg.Allocatable, BurstableConfig(burstable), BestEffortConfig()
	if t.cfg.MemoryProtection != NoMemoryProtection {
		// Written also when a sum fell to 0, so no protection outlives
		// the pods that asked for it.
		withProtection := ResourceConfig{}
		if kubepodsCfg != nil {
			withProtection = *kubepodsCfg
		}
		QoSMemoryProtection(t.cfg.MemoryProtection, active, &withProtection, burstableCfg)
		kubepodsCfg = &withProtection
	}
	if err := t.mgr.Set(t.Kubepods(), kubepodsCfg); err != nil {
		errs = append(errs, fmt.Errorf("node allocatable: %w", err))
	}
	if pct := t.cfg.MemoryReserve; pct != nil && t.cfg.Allocatable != nil && t.cfg.Allocatable.Memory != nil && *t.cfg.Allocatable.Memory > 0 {
		b, be := QOSReservedMemory(*t.cfg.Allocatable.Memory, *pct, active)
		burstableCfg.Memory, bestEffortCfg.Memory = &b, &be
	}
	for _, q := range []struct {
		class corev1.PodQOSClass
		rc    *ResourceConfig
	}{{corev1.PodQOSBurstable, burstableCfg}, {corev1.PodQOSBestEffort, bestEffortCfg}} {
		if err := t.setQoS(t.QoSParent(q.class), q.rc); err != nil {
			errs = append(errs, err)
		}
	}
	t.qosErr = errors.Join(errs...)
	return t.qosErr
}

// setQoS writes a QoS cgroup. A memory limit below what the class already
// uses cannot be written (the kernel fails to reclaim down to it); then, as
// the kubelet does, the limit is set to the current usage, which stops
// further growth until evictions bring it down and a later sync lowers it.
func (t *Tree) setQoS(name Name, rc *ResourceConfig) error {
	err := t.mgr.Set(name, rc)
	if err == nil || rc.Memory == nil {
		return err
	}
	st, serr := ReadMemoryStats(t.mgr, name)
	if serr != nil || int64(st.Usage) <= *rc.Memory {
		return err
	}
	capped := *rc
	usage := int64(st.Usage)
	capped.Memory = &usage
	if err2 := t.mgr.Set(name, &capped); err2 != nil {
		return errors.Join(err, err2)
	}
	return nil
}

// Healthy fails when the last write of kubepods or the QoS cgroups failed,
// or kubepods is gone.
func (t *Tree) Healthy() error {
	if !t.cfg.PerQOS {
		return nil
	}
	t.mu.Lock()
	err := t.qosErr
	t.mu.Unlock()
	if err != nil {
		return fmt.Errorf("QoS cgroups cannot be written: %w", err)
	}
	if !t.mgr.Exists(t.Kubepods()) {
		return fmt.Errorf("%s is missing (it is recreated at the next reconcile)", t.mgr.Path(t.Kubepods()))
	}
	return nil
}

// EnsurePod creates the pod's cgroup if missing, writes its values and
// returns it as the runtime names a parent.
func (t *Tree) EnsurePod(pod *corev1.Pod) (parent string, err error) {
	name, ok := t.PodCgroup(pod)
	if !ok {
		return "", nil
	}
	if err := t.mgr.Set(name, PodConfig(pod, t.cfg.Pod)); err != nil {
		return "", fmt.Errorf("pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return t.mgr.CgroupParent(name), nil
}

// CgroupParent is the pod cgroup as the runtime names a parent (a slice
// under the systemd driver); "" without per-QoS cgroups.
func (t *Tree) CgroupParent(pod *corev1.Pod) string {
	if name, ok := t.PodCgroup(pod); ok {
		return t.mgr.CgroupParent(name)
	}
	return ""
}

// PodCgroups finds every pod cgroup on disk ("pod<uid>" under kubepods and
// the QoS cgroups), whether or not the agent knows the pod.
func (t *Tree) PodCgroups() (map[types.UID]Name, error) {
	found := map[types.UID]Name{}
	if !t.cfg.PerQOS {
		return found, nil
	}
	for _, class := range []corev1.PodQOSClass{corev1.PodQOSGuaranteed, corev1.PodQOSBurstable, corev1.PodQOSBestEffort} {
		parent := t.QoSParent(class)
		children, err := t.mgr.Children(parent)
		if err != nil {
			return nil, err
		}
		for _, c := range children {
			if uid, ok := strings.CutPrefix(c, "pod"); ok && uid != "" {
				found[types.UID(uid)] = parent.Child(c)
			}
		}
	}
	return found, nil
}

// RemovePod kills whatever still runs in a pod cgroup (as KillPod does:
// frozen on v1, never init or the agent; up to five rounds, as the
// kubelet does) and removes it. A missing cgroup is success.
func (t *Tree) RemovePod(name Name) error {
	delay := 10 * time.Millisecond
	for attempt := 0; attempt < 5; attempt++ {
		pids, err := t.mgr.Pids(name)
		if err != nil {
			return err
		}
		if !slices.ContainsFunc(pids, killable) {
			break
		}
		if _, err := t.kill(name); err != nil {
			return err
		}
		time.Sleep(delay)
		delay *= 2
	}
	return t.mgr.Remove(name)
}

// killable is a pid a pod's cgroup may hold: not init, not the agent.
func killable(pid int) bool { return pid > 1 && pid != os.Getpid() }

// OOMKills is the number of processes the kernel OOM killer ended in the
// pod's cgroup and below (v1 memory.oom_control, v2 memory.events).
func (t *Tree) OOMKills(pod *corev1.Pod) (int, error) {
	name, ok := t.PodCgroup(pod)
	if !ok {
		return 0, nil
	}
	st, err := ReadMemoryStats(t.mgr, name)
	if err != nil {
		return 0, err
	}
	return int(st.OOMKills), nil
}

// TreeEntry is a cgroup of the QoS tree; Pod and QOS are filled in by who
// knows the pods.
type TreeEntry = api.CgroupEntry

// Inspect lists the QoS tree depth first: kubepods, its Guaranteed pods,
// then burstable and besteffort with their pods, each with its values.
func (t *Tree) Inspect() ([]TreeEntry, error) {
	var out []TreeEntry
	add := func(name Name, depth int, uid types.UID) error {
		v, err := Inspect(t.mgr, name)
		if err != nil {
			return err
		}
		out = append(out, TreeEntry{CgroupValues: v, Depth: depth, PodUID: uid})
		return nil
	}
	pods, err := t.PodCgroups()
	if err != nil {
		return nil, err
	}
	if err := add(t.Kubepods(), 0, ""); err != nil {
		return nil, err
	}
	for _, class := range []corev1.PodQOSClass{corev1.PodQOSGuaranteed, corev1.PodQOSBurstable, corev1.PodQOSBestEffort} {
		parent, depth := t.QoSParent(class), 1
		if class != corev1.PodQOSGuaranteed {
			if err := add(parent, 1, ""); err != nil {
				return nil, err
			}
			depth = 2
		}
		var uids []string
		for uid, name := range pods {
			if name.Cgroupfs() == parent.Child("pod"+string(uid)).Cgroupfs() {
				uids = append(uids, string(uid))
			}
		}
		sort.Strings(uids)
		for _, uid := range uids {
			// A pod that ends between the listing and the reading is skipped.
			if err := add(pods[types.UID(uid)], depth, types.UID(uid)); err != nil && !errors.Is(err, os.ErrNotExist) {
				return nil, err
			}
		}
	}
	return out, nil
}
