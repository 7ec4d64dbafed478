package agent

// The eviction manager's wiring: its signals, what it reclaims before
// evicting, the pod manager as it sees it, and kernel OOM kills.

import (
	"context"
	"fmt"
	"path"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"nodeagent/agent/pods"
	"nodeagent/cgroups"
	"nodeagent/eviction"
)

// evictionSignals checks the thresholds against what the node has and
// arms the kernel notifications that ring the eviction alarm.
func (a *Agent) evictionSignals(ctx context.Context, p *parts) error {
	cfg, machine := a.cfg, p.machine
	thresholds, err := cfg.EvictionThresholds()
	if err != nil {
		return err
	}
	podsMemory := machine.MemoryBytes
	if rc := cgroups.NodeAllocatableConfig(p.capacity, cfg.Reserved(), cfg.EnforcePods()); rc != nil && rc.Memory != nil {
		podsMemory = *rc.Memory
	}
	signals := func() *eviction.HostSource {
		return &eviction.HostSource{
			Cgroups: p.mgr, Kubepods: p.tree.Kubepods(), MemoryCapacity: machine.MemoryBytes, MemoryAllocatable: podsMemory,
			NodeFsPath: a.opts.RootDir, ImageFs: eviction.RuntimeImageFs(p.rt), PIDMax: machine.PIDMax, Now: a.opts.Clock.Now,
		}
	}
	// The capacities come from a reading that arms nothing: a refused
	// threshold leaves no memcg line or memory.high behind.
	first, err := signals().Observe(ctx)
	if err != nil {
		a.log.Warn("some eviction signals cannot be read; thresholds on them are not acted on", "err", err)
	}
	capacities := map[eviction.Signal]int64{}
	for sig, o := range first {
		capacities[sig] = o.Capacity
	}
	if err := eviction.CheckAgainstCapacity(thresholds, capacities); err != nil {
		return fmt.Errorf("eviction thresholds refused: %w", err)
	}
	p.alarm = eviction.NewAlarm()
	host := signals()
	host.Thresholds = thresholds
	host.Memcg = eviction.NewMemcgThresholds(p.alarm.Ring)
	p.closers = append(p.closers, host.Memcg.Close)
	wires, stop := eviction.WatchMemoryPressure(p.mgr, p.tree.Kubepods(), p.alarm, a.log)
	host.Tripwires = wires
	p.closers = append(p.closers, stop)
	p.thresholds, p.signals = thresholds, host
	return nil
}

// reclaim frees node resources before a disk eviction, in the kubelet's
// order: dead containers, then unused images (which the removed
// containers may have been holding).
func (p *parts) reclaim(ctx context.Context, _ eviction.Signal) (string, bool) {
	var did []string
	containers, err := p.manager.ReclaimContainers(ctx)
	did = append(did, fmt.Sprintf("removed %d dead containers", containers))
	if err != nil {
		did = append(did, "container garbage collection failed: "+err.Error())
	}
	images, err := p.imageGC.DeleteUnused(ctx)
	did = append(did, fmt.Sprintf("removed %d unused images", len(images)))
	if err != nil {
		did = append(did, "image garbage collection failed: "+err.Error())
	}
	return strings.Join(did, "; "), containers > 0 || len(images) > 0
}

// onKernelOOM records a kernel OOM kill: a metric, a node event naming
// the pod, and an eviction round (a kill is the strongest pressure signal
// there is).
func (a *Agent) onKernelOOM(p *parts) func(eviction.OOMKill) {
	return func(k eviction.OOMKill) {
		p.metrics.kernelOOMKills.WithLabelValues(k.Constraint).Inc()
		// The admitted pod, not only a published status: a container killed
		// as it starts can go before its pod's first status.
		podOf := func(uid types.UID) (*corev1.Pod, bool) {
			if pod, ok := p.manager.Pod(uid); ok {
				return pod, true
			}
			return p.store.Get(uid)
		}
		p.recorder.Event(p.recorder.NodeRef(), corev1.EventTypeWarning, "OOMKilling", eviction.OOMMessage(k, podOf))
		a.log.Warn("kernel OOM killer", "process", k.Process, "pid", k.PID, "cgroup", k.TaskMemcg, "limit_of", k.OOMMemcg, "constraint", k.Constraint)
		p.alarm.Ring(k.Seen, eviction.WokenByKernelOOM)
		if uid := eviction.PodUIDFromCgroup(k.TaskMemcg); uid != "" {
			what, why := k.Summary()
			p.manager.KernelOOMKill(types.UID(uid), cgroups.ContainerIDOf(path.Base(k.TaskMemcg)), what, why)
		}
	}
}

// evictedPods is the pod manager as eviction sees it: an eviction is a
// stop that keeps the pod's status.
type evictedPods struct{ *pods.Manager }

func (e evictedPods) Evict(uid types.UID, ev eviction.Eviction) (eviction.Kill, error) {
	f := &pods.Failure{Reason: eviction.Reason, Message: ev.Message, Event: eviction.Reason, Annotations: ev.Annotations}
	if ev.Disruption {
		f.Disruption = ev.Message
	}
	s, err := e.StopPod(uid, pods.StopOptions{Grace: &ev.Grace, Failure: f, KillNow: ev.KillNow, Why: "evicted"})
	return eviction.Kill{Done: s.Killed, Sigkilled: s.Sigkilled, Err: s.KillErr}, err
}

// killPod is how the pod manager kills a hard memory threshold's victims
// at once: through their pod cgroups, unless the operator chose
// the kubelet's graceful stop or there are no pod cgroups.
func (p *parts) killPod(perQOS, graceful bool) func(*corev1.Pod) (int, error) {
	if graceful || !perQOS {
		return nil
	}
	return p.tree.KillPod
}

// absoluteAllocatableMemory is the node's memory less the reserved, what
// memoryQoS throttles a container without a limit towards (the kubelet's
// GetNodeAllocatableAbsolute).
func absoluteAllocatableMemory(capacity corev1.ResourceList, reserved []corev1.ResourceList) int64 {
	rc := cgroups.NodeAllocatableConfig(capacity, reserved, true)
	if rc == nil || rc.Memory == nil {
		return 0
	}
	return *rc.Memory
}
