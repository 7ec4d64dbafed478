// Package cpumanager is the kubelet's CPU manager with the static policy:
// containers of Guaranteed pods that ask for whole CPUs get those CPUs to
// themselves, every other container runs on the shared pool (the CPUs no
// one holds), and the assignments are checkpointed in cpu_manager_state so
// an agent restart keeps them.
package cpumanager

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/cpuset"

	"nodeagent/internal/qos"
)

// PolicyStatic is the only policy this package runs; "none" is no manager.
const PolicyStatic = "static"

// Options configure a Manager.
type Options struct {
	Topology Topology
	// Reserved are the CPUs kept for the system (reservedSystemCPUs, or
	// taken by topology for systemReserved+kubeReserved cpu): never given
	// exclusively.
	Reserved cpuset.CPUSet
	// StrictReservation (strict-cpu-reservation) also keeps the shared
	// pool off the reserved CPUs.
	StrictReservation bool
	// FullPhysicalCPUsOnly (full-pcpus-only) admits only whole cores: a
	// request that is not a multiple of the threads per core, or more than
	// the free whole cores hold, is refused with an SMTAlignmentError.
	FullPhysicalCPUsOnly bool
	// PreferAlignByUncoreCache (prefer-align-cpus-by-uncorecache) takes
	// a request's CPUs from as few last-level caches as it can.
	PreferAlignByUncoreCache bool
	StateFile                string // cpu_manager_state
	Log                      *slog.Logger
}

// Manager holds the exclusive assignments. Methods are safe for
// concurrent use.
type Manager struct {
	opts Options
	base cpuset.CPUSet // the shared pool when nothing is exclusive

	mu       sync.Mutex
	assigned assignments
	onChange []func()
	// pinned and failed count the containers that asked for exclusive
	// CPUs and those refused (the kubelet's pinning metrics); aligned and
	// misaligned those admitted and refused under full-pcpus-only;
	// oneUncore the new assignments within one uncore cache.
	pinned, failed                 uint64
	aligned, misaligned, oneUncore uint64
}

// New loads the checkpoint. One that does not read back, was written for
// another policy or names CPUs that are not the node's exclusive ones is
// logged with its path and dropped: the agent re-admits the pods it runs,
// which assigns their CPUs again.
func New(opts Options) (*Manager, error) {
	all := opts.Topology.All()
	if opts.Reserved.IsEmpty() {
		return nil, errors.New("the static policy needs reserved CPUs: set reservedSystemCPUs or a cpu in kubeReserved or systemReserved")
	}
	if !opts.Reserved.IsSubsetOf(all) {
		return nil, fmt.Errorf("reserved CPUs %s are not all online (online: %s)", opts.Reserved, all)
	}
	if opts.Reserved.Equals(all) {
		return nil, fmt.Errorf("reserved CPUs %s are every CPU: none is left for pods", opts.Reserved)
	}
	m := &Manager{opts: opts, base: all, assigned: assignments{}}
	if opts.StrictReservation {
		m.base = all.Difference(opts.Reserved)
	}
	policy, a, err := readState(opts.StateFile)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		kept := opts.StateFile + ".corrupt"
		if os.Rename(opts.StateFile, kept) != nil {
			kept = ""
		}
		opts.Log.Warn("CPU manager checkpoint unreadable; the running pods' CPUs are assigned again", "file", opts.StateFile, "err", err, "kept_as", kept)
	case policy != PolicyStatic:
		opts.Log.Warn("CPU manager checkpoint is of another policy; the running pods' CPUs are assigned again", "file", opts.StateFile, "policy", policy)
	default:
		m.assigned = m.valid(a)
	}
	return m, m.writeLocked()
}

// valid keeps the assignments that name exclusive CPUs of this node and
// do not overlap another pod's.
func (m *Manager) valid(a assignments) assignments {
	out := assignments{}
	taken := cpuset.New()
	for _, uid := range slices.Sorted(maps.Keys(a)) {
		pod := cpuset.New()
		for _, set := range a[uid] {
			pod = pod.Union(set)
		}
		if !pod.IsSubsetOf(m.exclusivePool()) || !pod.Intersection(taken).IsEmpty() {
			m.opts.Log.Warn("CPU manager checkpoint entry dropped: its CPUs are reserved, offline or another pod's", "file", m.opts.StateFile, "pod_uid", uid, "cpus", pod.String())
			continue
		}
		taken = taken.Union(pod)
		out[uid] = a[uid]
	}
	return out
}

// exclusivePool is every CPU that can be given exclusively.
func (m *Manager) exclusivePool() cpuset.CPUSet {
	return m.opts.Topology.All().Difference(m.opts.Reserved)
}

// Allocatable is every CPU outside the reserved set (the kubelet's
// GetAllocatableCPUs).
func (m *Manager) Allocatable() cpuset.CPUSet { return m.exclusivePool() }

// OnChange registers f, called (without locks held) after the shared
// pool changed, so running containers are moved onto it.
func (m *Manager) OnChange(f func()) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.onChange = append(m.onChange, f)
}

// ExclusiveCPUs is how many CPUs the container gets to itself, as the
// kubelet's static policy decides: its whole cpu request in a Guaranteed
// pod, 0 for a fraction, another class or a pod with pod-level resources.
func ExclusiveCPUs(pod *corev1.Pod, c *corev1.Container) int {
	if qos.Class(pod) != corev1.PodQOSGuaranteed || qos.PodLevelSet(pod) {
		return 0
	}
	q := c.Resources.Requests[corev1.ResourceCPU]
	if q.Value()*1000 != q.MilliValue() {
		return 0
	}
	return int(q.Value())
}

// Allocate assigns the exclusive CPUs of pod's containers, init containers
// first; a regular init container's CPUs are free again for the containers
// after it, as it has finished by then. Containers already assigned keep
// their CPUs; prefer names, per container, CPUs it already runs on (from
// the runtime), taken again when they are free. Nothing changes on error.
func (m *Manager) Allocate(pod *corev1.Pod, prefer func(container string) cpuset.CPUSet) error {
	m.mu.Lock()
	have := maps.Clone(m.assigned[pod.UID])
	if have == nil {
		have = map[string]cpuset.CPUSet{}
	}
	reuse := cpuset.New()
	changed := false
	for _, c := range allContainers(pod) {
		n := ExclusiveCPUs(pod, c.Container)
		if n == 0 {
			continue
		}
		m.pinned++ // as the kubelet counts: before it finds one assigned
		set, ok := have[c.Name]
		if !ok || set.Size() != n {
			delete(have, c.Name)
			free := m.freeLocked(pod.UID, have)
			err := m.alignedLocked(n, free)
			if err == nil {
				set, err = m.pick(free.Union(reuse), n, prefer, c.Name)
			}
			if err != nil {
				m.failed++
				if m.opts.FullPhysicalCPUsOnly {
					m.misaligned++
				}
				m.mu.Unlock()
				return err
			}
			have[c.Name] = set
			changed = true
			if m.opts.Topology.SameUncore(set) {
				m.oneUncore++
			}
		}
		if m.opts.FullPhysicalCPUsOnly {
			m.aligned++
		}
		if c.init && !c.sidecar {
			reuse = reuse.Union(set)
		} else {
			reuse = reuse.Difference(set)
		}
	}
	if !changed {
		m.mu.Unlock()
		return nil
	}
	old := m.assigned[pod.UID]
	m.assigned[pod.UID] = have
	if err := m.writeLocked(); err != nil {
		if old == nil {
			delete(m.assigned, pod.UID)
		} else {
			m.assigned[pod.UID] = old
		}
		m.mu.Unlock()
		return err
	}
	m.notifyUnlock()
	return nil
}

// SMTAlignmentError is full-pcpus-only's refusal, worded as the kubelet's
// (its Type is the pod's status reason).
type SMTAlignmentError struct {
	Requested, PerCore, FreePhysical int
	// ByFreeCores: the request is a multiple of the threads per core but
	// the free whole cores hold fewer CPUs.
	ByFreeCores bool
}

func (e SMTAlignmentError) Error() string {
	if e.ByFreeCores {
		return fmt.Sprintf("SMT Alignment Error: not enough free physical CPUs: available physical CPUs = %d, requested CPUs = %d, CPUs per core = %d", e.FreePhysical, e.Requested, e.PerCore)
	}
	return fmt.Sprintf("SMT Alignment Error: requested %d cpus not multiple cpus per core = %d", e.Requested, e.PerCore)
}

// Type is the kubelet's admission reason.
func (SMTAlignmentError) Type() string { return "SMTAlignmentError" }

// alignedLocked is full-pcpus-only's check: n a multiple of the threads
// per core, and no more than free holds outside the cores of the reserved
// CPUs (their siblings would otherwise be handed out as half cores).
func (m *Manager) alignedLocked(n int, free cpuset.CPUSet) error {
	if !m.opts.FullPhysicalCPUsOnly {
		return nil
	}
	perCore := m.opts.Topology.CPUsPerCore()
	if n%perCore != 0 {
		return SMTAlignmentError{Requested: n, PerCore: perCore}
	}
	physical := free.Difference(m.opts.Topology.CoresOf(m.opts.Reserved)).Size()
	if n > physical {
		return SMTAlignmentError{Requested: n, PerCore: perCore, FreePhysical: physical, ByFreeCores: true}
	}
	return nil
}

// pick takes n of free, the preferred CPUs when they are free.
func (m *Manager) pick(free cpuset.CPUSet, n int, prefer func(string) cpuset.CPUSet, name string) (cpuset.CPUSet, error) {
	if prefer != nil {
		if p := prefer(name); p.Size() == n && p.IsSubsetOf(free) {
			return p, nil
		}
	}
	return take(m.opts.Topology, free, n, m.opts.PreferAlignByUncoreCache)
}

// freeLocked is what a container of pod can be given: the exclusive pool
// less what other pods hold and what pod's containers in have hold.
func (m *Manager) freeLocked(uid types.UID, have map[string]cpuset.CPUSet) cpuset.CPUSet {
	free := m.exclusivePool()
	for other, containers := range m.assigned {
		if other == uid {
			continue
		}
		for _, set := range containers {
			free = free.Difference(set)
		}
	}
	for _, set := range have {
		free = free.Difference(set)
	}
	return free
}

// Release frees the pod's CPUs, once it is gone.
func (m *Manager) Release(uid types.UID) {
	m.Retain(func(u types.UID) bool { return u != uid })
}

// Retain frees the CPUs of pods keep refuses: pods that went while the
// agent was down.
func (m *Manager) Retain(keep func(types.UID) bool) {
	m.mu.Lock()
	old := maps.Clone(m.assigned)
	maps.DeleteFunc(m.assigned, func(uid types.UID, _ map[string]cpuset.CPUSet) bool { return !keep(uid) })
	if len(old) == len(m.assigned) {
		m.mu.Unlock()
		return
	}
	if err := m.writeLocked(); err != nil {
		// The CPUs are free in memory all the same: the next write
		// records it, and a restart re-assigns only running pods.
		m.opts.Log.Warn("CPU manager checkpoint not written", "err", err)
	}
	m.notifyUnlock()
}

// notifyUnlock unlocks m, then tells the listeners.
func (m *Manager) notifyUnlock() {
	fs := slices.Clone(m.onChange)
	m.mu.Unlock()
	for _, f := range fs {
		f()
	}
}

// CPUs is where the container runs: its exclusive CPUs, or the shared
// pool.
func (m *Manager) CPUs(uid types.UID, container string) (set cpuset.CPUSet, exclusive bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if set, ok := m.assigned[uid][container]; ok {
		return set, true
	}
	return m.sharedLocked(), false
}

// HasExclusive reports whether any container of the pod holds CPUs.
func (m *Manager) HasExclusive(uid types.UID) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.assigned[uid]) > 0
}

// Shared is the shared pool: the CPUs no container holds (the reserved
// ones included unless the reservation is strict).
func (m *Manager) Shared() cpuset.CPUSet {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.sharedLocked()
}

func (m *Manager) sharedLocked() cpuset.CPUSet {
	s := m.base
	for _, containers := range m.assigned {
		for _, set := range containers {
			s = s.Difference(set)
		}
	}
	return s
}

// Reserved are the CPUs kept for the system.
func (m *Manager) Reserved() cpuset.CPUSet { return m.opts.Reserved }

// Strict reports strict-cpu-reservation.
func (m *Manager) Strict() bool { return m.opts.StrictReservation }

// All is a copy of every exclusive assignment, by pod and container.
func (m *Manager) All() map[types.UID]map[string]cpuset.CPUSet {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[types.UID]map[string]cpuset.CPUSet, len(m.assigned))
	for uid, containers := range m.assigned {
		out[uid] = maps.Clone(containers)
	}
	return out
}

// Pinning counts the containers that asked for exclusive CPUs since the
// start, and those refused.
func (m *Manager) Pinning() (requests, errors uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.pinned, m.failed
}

// Alignment counts, since the start, the containers admitted and refused
// under full-pcpus-only and the new assignments within one uncore cache
// (the kubelet's container_aligned_compute_resources counters).
func (m *Manager) Alignment() (physical, physicalFailed, uncore uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.aligned, m.misaligned, m.oneUncore
}

// Assigned is a copy of the pod's exclusive CPUs by container.
func (m *Manager) Assigned(uid types.UID) map[string]cpuset.CPUSet {
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps.Clone(m.assigned[uid])
}

func (m *Manager) writeLocked() error {
	return writeState(m.opts.StateFile, PolicyStatic, m.sharedLocked(), m.assigned)
}

type podContainer struct {
	*corev1.Container
	init, sidecar bool
}

func allContainers(pod *corev1.Pod) []podContainer {
	var out []podContainer
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		sidecar := c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
		out = append(out, podContainer{Container: c, init: true, sidecar: sidecar})
	}
	for i := range pod.Spec.Containers {
		out = append(out, podContainer{Container: &pod.Spec.Containers[i]})
	}
	return out
}
