package pods

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/cpuset"

	"nodeagent/agent/pleg"
	"nodeagent/cgroups/cpumanager"
	"nodeagent/internal/qos"
)

// CPUs is the CPU manager's static policy (cpumanager.Manager): exclusive
// CPUs assigned at admission, the shared pool for every other container.
type CPUs interface {
	Allocate(pod *corev1.Pod, prefer func(container string) cpuset.CPUSet) error
	Release(uid types.UID)
	Retain(keep func(types.UID) bool)
	CPUs(uid types.UID, container string) (set cpuset.CPUSet, exclusive bool)
}

// admitCPUsLocked assigns the pod's exclusive CPUs, the kubelet's CPU
// manager admission: a pod whose whole CPUs are not free is refused. A
// running pod whose assignment was lost gets the CPUs it runs on again
// where they are free.
func (m *Manager) admitCPUsLocked(p *corev1.Pod) *Rejection {
	if m.cpus == nil {
		return nil
	}
	prefer := func(name string) cpuset.CPUSet {
		recs := m.cache.Get(p.UID).ContainersNamed(name)
		if len(recs) == 0 || recs[0].State != runtimeapi.ContainerState_CONTAINER_RUNNING {
			return cpuset.New()
		}
		set, _ := cpuset.Parse(recs[0].GetResources().GetLinux().GetCpusetCpus())
		return set
	}
	if err := m.cpus.Allocate(p, prefer); err != nil {
		// The kubelet's admission: an error that names its type is the
		// reason (SMTAlignmentError); any other is unexpected.
		var typed interface{ Type() string }
		if errors.As(err, &typed) {
			return &Rejection{Reason: typed.Type(), Message: err.Error()}
		}
		return &Rejection{Reason: "UnexpectedAdmissionError", Message: fmt.Sprintf("Allocate failed due to %v, which is unexpected", err)}
	}
	return nil
}

// cpuPoolChanged wakes every worker after the shared pool grew or shrank,
// so that their running containers move onto it.
func (m *Manager) cpuPoolChanged() {
	m.mu.Lock()
	workers := make([]*worker, 0, len(m.workers))
	for _, w := range m.workers {
		workers = append(workers, w)
	}
	m.mu.Unlock()
	for _, w := range workers {
		w.wake()
	}
}

// syncCPUSets moves the pod's running containers onto the CPUs the CPU
// manager gives them now, as the kubelet's CPU manager reconcile does
// every cpuManagerReconcilePeriod; here each change of the pool wakes the
// workers, and every sync checks.
func (w *worker) syncCPUSets(ctx context.Context, pod *corev1.Pod, rt *pleg.PodRuntime) {
	if w.m.cpus == nil {
		return
	}
	// What runs now: syncResize may have changed it after rt was read, and
	// an old view sent back would undo the resize.
	if fresh := w.m.cache.Get(w.uid); fresh != nil {
		rt = fresh
	}
	updated := false
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			c := &cs[i]
			recs := rt.ContainersNamed(c.Name)
			if len(recs) == 0 || recs[0].State != runtimeapi.ContainerState_CONTAINER_RUNNING {
				continue
			}
			if recs[0].GetResources().GetLinux() == nil {
				w.log.Debug("container's CPUs unknown: the runtime reports no resources", "container", c.Name)
				continue
			}
			have, err := cpuset.Parse(recs[0].GetResources().GetLinux().GetCpusetCpus())
			want, _ := w.m.cpus.CPUs(w.uid, c.Name)
			if err == nil && have.Equals(want) {
				continue
			}
			// Only the cpuset: the rest stays as it runs (a resize is
			// syncResize's, memory decrease guard and all).
			r := cloneResources(recs[0].GetResources().GetLinux())
			r.CpusetCpus = want.String()
			if err := w.m.rt.UpdateContainerResources(ctx, recs[0].Id, r); err != nil {
				if ctx.Err() == nil {
					w.log.Warn("move container onto its CPUs", "container", c.Name, "cpus", want.String(), "err", err)
				}
				continue
			}
			updated = true
			w.log.Debug("container moved onto its CPUs", "container", c.Name, "from", have.String(), "cpus", want.String())
		}
	}
	if updated {
		w.inspect(ctx, rt)
	}
}

// CPUPoolChanged is the CPU manager's OnChange: it may come with the
// manager's lock held (admission), so it only queues the wake-up.
func (m *Manager) CPUPoolChanged() { m.cpuPool.Add("") }

// releaseCPUsLocked frees what admitCPUsLocked assigned to a pod refused
// after it.
func (m *Manager) releaseCPUsLocked(uid types.UID) {
	if m.cpus != nil {
		m.cpus.Release(uid)
	}
}

// cpuResizeInfeasibleLocked refuses, as the kubelet 1.37 does (its
// InPlacePodVerticalScalingExclusiveCPUs gate is off by default), a resize
// of a Guaranteed pod's cpu requests under the static policy: exclusive
// CPUs are assigned once, at admission.
func (m *Manager) cpuResizeInfeasibleLocked(p *corev1.Pod) string {
	if m.cpus == nil || qos.Class(p) != corev1.PodQOSGuaranteed {
		return ""
	}
	have, ok := m.allocated.Get(p.UID)
	if !ok {
		return ""
	}
	for _, cs := range [][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for i := range cs {
			if resizableContainer(p, cs[i].Name) != &cs[i] {
				continue
			}
			was := have.Containers[cs[i].Name].Requests[corev1.ResourceCPU]
			if now := cs[i].Resources.Requests[corev1.ResourceCPU]; !now.Equal(was) {
				return `Resize is infeasible for Guaranteed Pods alongside CPU Manager policy "static"`
			}
		}
	}
	return ""
}

// retainCPUsLocked frees, once every source has synced, the CPUs of pods
// that are neither desired nor known (gone while the agent was away), as
// the kubelet's removeStaleState: before anything new is admitted.
func (m *Manager) retainCPUsLocked(desired map[types.UID]*corev1.Pod) {
	if m.cpus == nil {
		return
	}
	m.cpus.Retain(func(uid types.UID) bool {
		_, want := desired[uid]
		_, admitted := m.pods[uid]
		_, working := m.workers[uid]
		return want || admitted || working
	})
}

// reassignCPUsLocked assigns a pod's CPUs again as its worker starts: a
// pod re-added under the same UID while its predecessor terminated had
// them freed by that predecessor. A pod that holds them is left alone.
func (m *Manager) reassignCPUsLocked(pod *corev1.Pod) {
	if m.cpus == nil || pod == nil {
		return
	}
	missing := false
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			if _, held := m.cpus.CPUs(pod.UID, cs[i].Name); !held && cpumanager.ExclusiveCPUs(pod, &cs[i]) > 0 {
				missing = true
			}
		}
	}
	if !missing {
		return
	}
	if r := m.admitCPUsLocked(pod); r != nil {
		m.log.Warn("pod runs on the shared CPU pool: its exclusive CPUs went while it restarted", "pod", fullName(pod), "pod_uid", pod.UID, "err", r.Message)
	}
}
