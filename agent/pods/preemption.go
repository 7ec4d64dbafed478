package pods

import (
	"fmt"
	"math"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"nodeagent/agent/source"
	"nodeagent/internal/qos"
	"nodeagent/internal/sat"
)

// Critical pods preempt, as the kubelet's CriticalPodAdmissionHandler: a
// critical pod (static, mirror, or priority 2e9 and above) refused only
// for want of resources stops the pods it may preempt that free enough,
// touching Guaranteed pods least, then Burstable; it starts once they no
// longer run. The victims end Failed with reason Preempting (Succeeded
// when every container exits 0), a DisruptionTarget condition and a
// Preempting event.

const (
	preemptReason     = "Preempting"
	preemptMessage    = "Preempted in order to admit critical pod"
	preemptDisruption = "Pod was preempted by Kubelet to accommodate a critical pod."
	// systemCriticalPriority is the priority from which a pod is critical.
	systemCriticalPriority = 2000000000
)

// preemptions are the victims chosen for pods being admitted, and those
// still running for pods admitted that wait for them.
type preemptions struct {
	planned map[types.UID]plannedPreemption
	waiting map[types.UID]map[types.UID]bool
	// until is when a critical pod stops waiting for its victims (the
	// kubelet's killPodNow gives up after 1.5 times the grace period,
	// at least 10 s).
	until map[types.UID]time.Time
}

type plannedPreemption struct {
	victims []*corev1.Pod
	signal  string // the first resource lacking (kubelet_preemptions' label)
}

// criticalPod is the kubelet's IsCriticalPod.
func criticalPod(p *corev1.Pod) bool {
	_, mirror := p.Annotations[source.AnnotationMirror]
	return !source.FromAPI(p) || mirror || (p.Spec.Priority != nil && *p.Spec.Priority >= systemCriticalPriority)
}

// preemptable is the kubelet's Preemptable: a critical pod preempts what
// is not, and a pod preempts one of lower priority.
func preemptable(preemptor, preemptee *corev1.Pod) bool {
	if criticalPod(preemptor) && !criticalPod(preemptee) {
		return true
	}
	a, b := preemptor.Spec.Priority, preemptee.Spec.Priority
	return a != nil && b != nil && *a > *b
}

// admitResourcesLocked is the resource predicate with the critical pods'
// way out: the victims are planned, and stopped once nothing else refuses
// the pod (preemptPlannedLocked).
func (m *Manager) admitResourcesLocked(p *corev1.Pod, extended corev1.ResourceList) *Rejection {
	active := m.admittedLocked()
	r := admit(p, active, m.opts.MaxPods, m.opts.Allocatable, extended)
	if r == nil || !criticalPod(p) {
		return r
	}
	// Pods that run and are not being stopped already: the others free
	// nothing sooner for it.
	var candidates []*corev1.Pod
	for _, o := range active {
		w := m.workers[o.UID]
		if o.UID != p.UID && w != nil && !w.isTerminating() && !w.evicting() && preemptable(p, o) {
			candidates = append(candidates, o)
		}
	}
	reqs := shortfall(p, active, m.opts.MaxPods, m.opts.Allocatable, extended)
	victims, err := podsToPreempt(candidates, reqs)
	if err != nil {
		return &Rejection{Reason: "UnexpectedAdmissionError", Message: "Unexpected error while attempting to recover from admission failure: preemption: error finding a set of pods to preempt: " + err.Error()}
	}
	if m.preempt.planned == nil {
		m.preempt.planned = map[types.UID]plannedPreemption{}
	}
	plan := plannedPreemption{victims: victims}
	if len(reqs) > 0 {
		plan.signal = string(reqs[0].name)
	}
	m.preempt.planned[p.UID] = plan
	return nil
}

// preemptPlannedLocked stops the victims planned for an admitted pod, which
// then waits until none of them runs.
func (m *Manager) preemptPlannedLocked(p *corev1.Pod) {
	plan := m.preempt.planned[p.UID]
	delete(m.preempt.planned, p.UID)
	if len(plan.victims) == 0 {
		return
	}
	if m.preempt.waiting == nil {
		m.preempt.waiting, m.preempt.until = map[types.UID]map[types.UID]bool{}, map[types.UID]time.Time{}
	}
	wait := map[types.UID]bool{}
	longest := 10 * time.Second
	for _, v := range plan.victims {
		longest = max(longest, sat.Seconds(sat.Mul(gracePeriod(v, nil), 3)/2))
		m.log.Info("preempting pod to admit a critical pod", "pod", fullName(v), "pod_uid", v.UID, "for", fullName(p))
		m.stopLocked(v.UID, v, StopOptions{Why: "preempted for " + fullName(p), Failure: &Failure{
			Reason: preemptReason, Message: preemptMessage, Disruption: preemptDisruption, Event: preemptReason}})
		if m.workers[v.UID] != nil {
			wait[v.UID] = true
		}
		if m.preempted != nil {
			m.preempted(plan.signal)
		}
	}
	if len(wait) > 0 {
		m.preempt.waiting[p.UID] = wait
		m.preempt.until[p.UID] = m.clock.Now().Add(longest)
	}
}

// expirePreemptionWaitsLocked starts the critical pods whose victims did
// not stop in time, as the kubelet admits them then.
func (m *Manager) expirePreemptionWaitsLocked() {
	now := m.clock.Now()
	for uid, until := range m.preempt.until {
		if now.Before(until) {
			continue
		}
		m.log.Warn("pods preempted for a critical pod did not stop in time; starting it", "pod_uid", uid, "still_running", len(m.preempt.waiting[uid]))
		delete(m.preempt.waiting, uid)
		delete(m.preempt.until, uid)
		if p := m.pods[uid]; p != nil {
			m.startIfFreeLocked(p)
		}
	}
}

// waitsForVictimsLocked reports whether p waits for pods it preempted.
func (m *Manager) waitsForVictimsLocked(p *corev1.Pod) bool {
	if len(m.preempt.waiting[p.UID]) == 0 {
		return false
	}
	if _, listed := m.store.Get(p.UID); !listed {
		m.log.Info("critical pod waits for the pods it preempted to stop", "pod", fullName(p), "pod_uid", p.UID)
		m.store.Set(pendingCopy(p, m.opts.NodeIP))
	}
	return true
}

// victimStopped notes that a pod runs nothing any more (victimStoppedLocked).
func (m *Manager) victimStopped(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.victimStoppedLocked(uid)
}

// victimStoppedLocked notes that a pod runs nothing any more, and starts
// the critical pods that waited only for it.
func (m *Manager) victimStoppedLocked(uid types.UID) {
	for preemptor, wait := range m.preempt.waiting {
		if !wait[uid] {
			continue
		}
		delete(wait, uid)
		if len(wait) > 0 {
			continue
		}
		delete(m.preempt.waiting, preemptor)
		delete(m.preempt.until, preemptor)
		if p := m.pods[preemptor]; p != nil {
			m.startIfFreeLocked(p)
		}
	}
}

// requirement is what a pod lacks of one resource, in the kubelet's units
// (milli-CPU for cpu, a count for pods, else bytes).
type requirement struct {
	name     corev1.ResourceName
	quantity int64
}

// requestOf is the kubelet's GetResourceRequest.
func requestOf(p *corev1.Pod, name corev1.ResourceName) int64 {
	if name == corev1.ResourcePods {
		return 1
	}
	return amount(name, qos.PodRequests(p)[name])
}

// shortfall is each resource the pod asks more of than is free: the
// kubelet's insufficient resources, all of them (admit stops at the
// first).
func shortfall(p *corev1.Pod, admitted []*corev1.Pod, maxPods int, allocatable, extended corev1.ResourceList) []requirement {
	var out []requirement
	if n := int64(len(admitted)) + 1 - int64(maxPods); n > 0 {
		out = append(out, requirement{corev1.ResourcePods, n})
	}
	used := map[corev1.ResourceName]int64{}
	for _, o := range admitted {
		for name := range qos.PodRequests(o) {
			used[name] = sat.Add(used[name], requestOf(o, name))
		}
	}
	check := func(name corev1.ResourceName, capacity int64) {
		if req := requestOf(p, name); req > 0 {
			if n := sat.Add(req, used[name]) - capacity; n > 0 {
				out = append(out, requirement{name, n})
			}
		}
	}
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage} {
		if capacity, ok := allocatable[name]; ok && !capacity.IsZero() {
			check(name, amount(name, capacity))
		}
	}
	for name, capacity := range extended {
		check(name, amount(name, capacity))
	}
	return out
}

// podsToPreempt is the kubelet's getPodsToPreempt: the Guaranteed pods
// needed were every Burstable and BestEffort pod gone, then the Burstable
// ones needed beside those, then the BestEffort ones; each set chosen
// closest to what remains.
func podsToPreempt(candidates []*corev1.Pod, reqs []requirement) ([]*corev1.Pod, error) {
	var bestEffort, burstable, guaranteed []*corev1.Pod
	for _, p := range candidates {
		switch qos.Class(p) {
		case corev1.PodQOSBestEffort:
			bestEffort = append(bestEffort, p)
		case corev1.PodQOSBurstable:
			burstable = append(burstable, p)
		default:
			guaranteed = append(guaranteed, p)
		}
	}
	if left := subtract(reqs, candidates...); len(left) > 0 {
		return nil, fmt.Errorf("no set of running pods found to reclaim resources: %s", requirementsString(left))
	}
	g, err := closest(guaranteed, subtract(reqs, append(append([]*corev1.Pod{}, bestEffort...), burstable...)...))
	if err != nil {
		return nil, err
	}
	b, err := closest(burstable, subtract(reqs, append(append([]*corev1.Pod{}, bestEffort...), g...)...))
	if err != nil {
		return nil, err
	}
	be, err := closest(bestEffort, subtract(reqs, append(append([]*corev1.Pod{}, b...), g...)...))
	if err != nil {
		return nil, err
	}
	return append(append(be, b...), g...), nil
}

// closest is the kubelet's getPodsToPreemptByDistance: while something is
// still needed, the pod whose requests leave the least of it (the sum of
// squared fractions left), the smaller pod on a tie.
func closest(pods []*corev1.Pod, reqs []requirement) ([]*corev1.Pod, error) {
	pods = append([]*corev1.Pod{}, pods...)
	var out []*corev1.Pod
	for len(reqs) > 0 {
		if len(pods) == 0 {
			return nil, fmt.Errorf("no set of running pods found to reclaim resources: %s", requirementsString(reqs))
		}
		best, bestDist := 0, float64(len(reqs)+1)
		for i, p := range pods {
			if d := distance(reqs, p); d < bestDist || (d == bestDist && smallerRequest(p, pods[best])) {
				best, bestDist = i, d
			}
		}
		reqs = subtract(reqs, pods[best])
		out = append(out, pods[best])
		pods[best] = pods[len(pods)-1]
		pods = pods[:len(pods)-1]
	}
	return out, nil
}

func distance(reqs []requirement, p *corev1.Pod) float64 {
	d := 0.0
	for _, r := range reqs {
		if left := float64(r.quantity - requestOf(p, r.name)); left > 0 {
			d += math.Pow(left/float64(r.quantity), 2)
		}
	}
	return d
}

// subtract is what would still be needed were pods gone.
func subtract(reqs []requirement, pods ...*corev1.Pod) []requirement {
	var out []requirement
	for _, r := range reqs {
		left := r.quantity
		for _, p := range pods {
			if left -= requestOf(p, r.name); left <= 0 {
				break
			}
		}
		if left > 0 {
			out = append(out, requirement{r.name, left})
		}
	}
	return out
}

// smallerRequest: memory, then cpu; equal counts as smaller.
func smallerRequest(a, b *corev1.Pod) bool {
	for _, name := range []corev1.ResourceName{corev1.ResourceMemory, corev1.ResourceCPU} {
		if x, y := requestOf(a, name), requestOf(b, name); x != y {
			return x < y
		}
	}
	return true
}

func requirementsString(reqs []requirement) string {
	var b strings.Builder
	b.WriteString("[")
	for _, r := range reqs {
		fmt.Fprintf(&b, "(res: %s, q: %d), ", r.name, r.quantity)
	}
	return b.String() + "]"
}
