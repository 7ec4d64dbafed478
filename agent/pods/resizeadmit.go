package pods

import (
	"encoding/json"
	"log/slog"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"nodeagent/agent/pods/allocation"
	"nodeagent/internal/layout"
	"nodeagent/internal/qos"
)

// In-place resize, the manager's half (the kubelet's allocation manager):
// what each admitted pod's containers hold is checkpointed in
// allocated_pods_state. A spec asking for other resources is a resize;
// it is admitted against allocatable and the other pods' allocations, or
// waits with PodResizePending (Deferred: retried when pods go and every
// reconcile). The worker
// runs the allocated pod: the spec with its allocated resources.

func openAllocations(rootDir string, log *slog.Logger) *allocation.Store {
	return allocation.Open(layout.Root(rootDir).AllocatedPodsState(), log)
}

// allocatedViewLocked is the pod a pod being admitted runs as. A pod the
// runtime already runs keeps what it was allocated (an agent restarted
// mid-resize); a resize its spec asks for beyond that is then admitted
// like any other (retryResizesLocked).
func (m *Manager) allocatedViewLocked(p *corev1.Pod, running bool) *corev1.Pod {
	if have, ok := m.allocated.Get(p.UID); ok && running && !have.Equal(allocation.Of(p)) {
		m.desired[p.UID] = p
		return have.Apply(p)
	}
	return p
}

// allocateLocked checkpoints what an admitted pod runs with.
func (m *Manager) allocateLocked(view *corev1.Pod) {
	if err := m.allocated.Set(view.UID, allocation.Of(view)); err != nil {
		m.log.Warn("allocation not checkpointed", "pod", fullName(view), "err", err)
	}
}

// updateLocked hands an admitted pod's edited spec to its worker, with the
// resources allocated to it. It reports whether the allocation changed:
// the QoS parents follow what the pods hold, rewritten at once (the
// kubelet's wait for its periodic update).
func (m *Manager) updateLocked(old, p *corev1.Pod) bool {
	view := m.resizeLocked(p)
	m.pods[p.UID] = view
	if w := m.workers[p.UID]; w != nil {
		w.respec(view)
	}
	return !allocation.Of(old).Equal(allocation.Of(view))
}

// resizeLocked takes an admitted pod's updated spec and returns the pod
// its worker runs: the spec itself once its resources are allocated, else
// the spec with the resources allocated before.
func (m *Manager) resizeLocked(p *corev1.Pod) *corev1.Pod {
	want := allocation.Of(p)
	have, ok := m.allocated.Get(p.UID)
	if old := m.pods[p.UID]; !ok && old != nil {
		// The checkpoint lost its entry (a failed write): what the pod
		// was admitted with is what it runs, and a change is a resize.
		have, ok = allocation.Of(old), true
	}
	w := m.workers[p.UID]
	if !ok || have.Equal(want) {
		if !ok {
			m.allocateLocked(p)
		}
		delete(m.desired, p.UID)
		if w != nil {
			w.resizeNotPending()
		}
		return p
	}
	if w != nil && w.isTerminating() {
		return have.Apply(p)
	}
	m.desired[p.UID] = p
	if w == nil || !m.synced {
		// Tried again once its worker runs, and once every source has
		// sent its pods: before that the others' allocations are not
		// all known (the kubelet waits for sourcesReady alike).
		return have.Apply(p)
	}
	reason, message := m.resizeVerdictLocked(p)
	if reason == "" {
		if err := m.allocated.Set(p.UID, want); err != nil {
			m.log.Warn("resize not checkpointed; will retry", "pod", fullName(p), "err", err)
			return have.Apply(p)
		}
		delete(m.desired, p.UID)
		m.log.Info("pod resize admitted", "pod", fullName(p), "pod_uid", p.UID, "generation", p.Generation)
		w.respec(p) // before the condition: a sync that sees it runs this spec
		w.resizeAdmitted(p)
		return p
	}
	if reason == corev1.PodReasonInfeasible {
		delete(m.desired, p.UID) // until the spec changes again
	}
	w.resizePending(p, reason, message)
	return have.Apply(p)
}

// resizeVerdictLocked is "" when the resize fits, else the pending reason
// and message, in the kubelet's words: Infeasible for a memory change of
// a container that swaps, or a CPU change of a Guaranteed pod under the
// static CPU manager; Deferred for one that does not fit now.
func (m *Manager) resizeVerdictLocked(p *corev1.Pod) (string, string) {
	if msg := m.swapResizeInfeasibleLocked(p); msg != "" {
		return corev1.PodReasonInfeasible, msg
	}
	if msg := m.cpuResizeInfeasibleLocked(p); msg != "" {
		return corev1.PodReasonInfeasible, msg
	}
	var others []*corev1.Pod
	for _, o := range m.admittedLocked() {
		if o.UID != p.UID {
			others = append(others, o)
		}
	}
	var extended corev1.ResourceList
	if m.devices != nil {
		_, extended = m.devices.Resources()
	}
	if r := admit(p, others, m.opts.MaxPods, m.opts.Allocatable, extended); r != nil {
		return corev1.PodReasonDeferred, r.Message
	}
	return "", ""
}

// retryResizesLocked tries the pending resizes again in the kubelet's
// order (sortPendingResizes): resizes that ask no more first, then higher
// priority, then Guaranteed pods, then the longest pending. It reports
// whether one was admitted.
func (m *Manager) retryResizesLocked() bool {
	if !m.synced {
		return false
	}
	admitted := false
	pending := make([]*corev1.Pod, 0, len(m.desired))
	for uid, p := range m.desired {
		if _, ok := m.pods[uid]; !ok {
			delete(m.desired, uid)
			continue
		}
		pending = append(pending, p)
	}
	m.sortPendingResizesLocked(pending)
	for _, p := range pending {
		view := m.resizeLocked(p)
		if old := m.pods[p.UID]; old != view {
			admitted = admitted || !allocation.Of(old).Equal(allocation.Of(view))
			m.pods[p.UID] = view
			if w := m.workers[p.UID]; w != nil {
				w.respec(view)
			}
		}
	}
	return admitted
}

// sortPendingResizesLocked orders pending resizes as the kubelet retries
// them.
func (m *Manager) sortPendingResizesLocked(pending []*corev1.Pod) {
	increasing := map[types.UID]bool{}
	since := map[types.UID]time.Time{}
	for _, p := range pending {
		increasing[p.UID] = m.asksMoreLocked(p)
		if w := m.workers[p.UID]; w != nil {
			since[p.UID] = w.pendingSince()
		}
	}
	sort.SliceStable(pending, func(i, j int) bool {
		a, b := pending[i], pending[j]
		if increasing[a.UID] != increasing[b.UID] {
			return !increasing[a.UID]
		}
		if pa, pb := priority(a), priority(b); pa != pb {
			return pa > pb
		}
		if ga, gb := qos.Class(a) == corev1.PodQOSGuaranteed, qos.Class(b) == corev1.PodQOSGuaranteed; ga != gb {
			return ga
		}
		ta, tb := since[a.UID], since[b.UID]
		if ta.IsZero() != tb.IsZero() {
			return !ta.IsZero() // never pending yet goes last
		}
		return ta.Before(tb)
	})
}

// asksMoreLocked reports whether p's spec requests more CPU or memory than
// the pod was allocated (isResizeIncreasingRequests).
func (m *Manager) asksMoreLocked(p *corev1.Pod) bool {
	old := m.pods[p.UID]
	if old == nil {
		return false
	}
	want, have := qos.PodRequests(p), qos.PodRequests(old)
	return want.Memory().Cmp(*have.Memory()) > 0 || want.Cpu().Cmp(*have.Cpu()) > 0
}

// retryResizes is the periodic retry of the pending resizes.
func (m *Manager) retryResizes() {
	m.mu.Lock()
	resized, active := m.retryResizesLocked(), m.admittedLocked()
	m.mu.Unlock()
	if resized {
		if err := m.tree.SyncQoS(active); err != nil {
			m.log.Warn("update QoS cgroups", "err", err)
		}
	}
}

func priority(p *corev1.Pod) int32 {
	if p.Spec.Priority != nil {
		return *p.Spec.Priority
	}
	return 0
}

// forgetAllocations drops the checkpoint entries of pods neither admitted,
// nor run by a worker, nor in the runtime.
func (m *Manager) forgetAllocations() {
	keep := map[types.UID]bool{}
	for _, uid := range m.cache.UIDs() {
		keep[uid] = true
	}
	m.mu.Lock()
	for uid := range m.pods {
		keep[uid] = true
	}
	for uid := range m.workers {
		keep[uid] = true
	}
	m.mu.Unlock()
	if err := m.allocated.Retain(func(uid types.UID) bool { return keep[uid] }); err != nil {
		m.log.Warn("allocation checkpoint not pruned", "err", err)
	}
}

// resizeStatus is what the pod's status says of a resize: the kubelet's
// two conditions (nil: absent).
type resizeStatus struct {
	pending    *corev1.PodCondition
	inProgress *corev1.PodCondition
	// checked: the running containers matched the allocation at least
	// once since this worker started.
	checked bool
	// foundHalfDone: InProgress was set for a resize an earlier agent
	// left half applied; its completion is not announced.
	foundHalfDone bool
}

// conditions are the resize conditions to publish, in the kubelet's order.
func (r resizeStatus) conditions() []corev1.PodCondition {
	var out []corev1.PodCondition
	for _, c := range []*corev1.PodCondition{r.pending, r.inProgress} {
		if c != nil {
			out = append(out, *c)
		}
	}
	return out
}

// resizing reports whether an admitted resize is not applied yet: the
// worker writes the pod cgroup then, not the periodic reconcile.
func (w *worker) resizing() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.resize.inProgress != nil || !w.resize.checked
}

// pendingSince is when PodResizePending last turned to its reason (zero:
// not pending).
func (w *worker) pendingSince() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.resize.pending == nil {
		return time.Time{}
	}
	return w.resize.pending.LastTransitionTime.Time
}

// resizePending sets PodResizePending, with an event when it is new or its
// reason or generation changed.
func (w *worker) resizePending(p *corev1.Pod, reason, message string) {
	now := metav1.NewTime(w.m.clock.Now())
	c := &corev1.PodCondition{Type: corev1.PodResizePending, Status: corev1.ConditionTrue, Reason: reason, Message: message,
		ObservedGeneration: p.Generation, LastProbeTime: now, LastTransitionTime: now}
	w.mu.Lock()
	old := w.resize.pending
	if old != nil && old.Reason == reason {
		c.LastTransitionTime = old.LastTransitionTime
	}
	w.resize.pending = c
	w.mu.Unlock()
	if old == nil || old.Reason != reason || old.ObservedGeneration != p.Generation {
		w.log.Info("pod resize pending", "reason", reason, "message", message, "generation", p.Generation)
		w.event("", corev1.EventTypeWarning, "Resize"+reason, resizeMessage(p, "Pod resize "+reason, message))
	}
	w.wake()
}

// resizeNotPending clears PodResizePending (the spec went back to what was
// allocated).
func (w *worker) resizeNotPending() {
	w.mu.Lock()
	had := w.resize.pending != nil
	w.resize.pending = nil
	w.mu.Unlock()
	if had {
		w.wake()
	}
}

// resizeAdmitted starts PodResizeInProgress for the allocation p carries.
func (w *worker) resizeAdmitted(p *corev1.Pod) {
	now := metav1.NewTime(w.m.clock.Now())
	w.mu.Lock()
	w.resize.pending = nil
	w.resize.inProgress = &corev1.PodCondition{Type: corev1.PodResizeInProgress, Status: corev1.ConditionTrue,
		ObservedGeneration: p.Generation, LastProbeTime: now, LastTransitionTime: now}
	w.resize.foundHalfDone = false
	w.mu.Unlock()
	w.event("", corev1.EventTypeNormal, "ResizeStarted", resizeMessage(p, "Pod resize started", ""))
	w.wake()
}

// resizeAdmittedQuietly shows PodResizeInProgress for a resize found
// half applied (by an agent killed midway): started before, no event.
func (w *worker) resizeAdmittedQuietly(p *corev1.Pod) {
	now := metav1.NewTime(w.m.clock.Now())
	w.mu.Lock()
	if w.resize.inProgress == nil {
		w.resize.inProgress = &corev1.PodCondition{Type: corev1.PodResizeInProgress, Status: corev1.ConditionTrue,
			ObservedGeneration: p.Generation, LastProbeTime: now, LastTransitionTime: now}
		w.resize.foundHalfDone = true
	}
	w.mu.Unlock()
}

// resizeFailed turns PodResizeInProgress to reason Error with err's
// message, with an event when the message is new.
func (w *worker) resizeFailed(p *corev1.Pod, err error) {
	now := metav1.NewTime(w.m.clock.Now())
	w.mu.Lock()
	old := w.resize.inProgress
	c := &corev1.PodCondition{Type: corev1.PodResizeInProgress, Status: corev1.ConditionTrue, Reason: corev1.PodReasonError, Message: err.Error(),
		ObservedGeneration: p.Generation, LastProbeTime: now, LastTransitionTime: now}
	if old != nil {
		c.ObservedGeneration = old.ObservedGeneration
		if old.Reason == c.Reason {
			c.LastTransitionTime = old.LastTransitionTime
		}
	}
	w.resize.inProgress = c
	w.mu.Unlock()
	if old == nil || old.Message != c.Message {
		w.log.Warn("pod resize failed; will retry", "err", err)
		w.event("", corev1.EventTypeWarning, "ResizeError", resizeMessage(p, "Pod resize error", err.Error()))
	}
}

// resizeChecked ends the start-up check without a condition (one it set
// for what it found half done goes too).
func (w *worker) resizeChecked() {
	w.mu.Lock()
	w.resize.checked = true
	if w.resize.foundHalfDone {
		w.resize.inProgress, w.resize.foundHalfDone = nil, false
	}
	w.mu.Unlock()
}

// resizeDone clears PodResizeInProgress once the running containers hold
// the allocation of p's generation or a later one.
func (w *worker) resizeDone(p *corev1.Pod) {
	w.mu.Lock()
	old := w.resize.inProgress
	if old != nil && old.ObservedGeneration > p.Generation {
		w.mu.Unlock()
		return // admitted for a spec this sync did not run yet
	}
	quiet := w.resize.foundHalfDone
	w.resize.inProgress, w.resize.checked, w.resize.foundHalfDone = nil, true, false
	w.mu.Unlock()
	if old != nil && !quiet {
		w.log.Info("pod resize completed", "generation", p.Generation)
		w.event("", corev1.EventTypeNormal, "ResizeCompleted", resizeMessage(p, "Pod resize completed", ""))
	}
}

// resizeMessage is the kubelet's resize event text: a prefix, then the
// allocated containers' resources and the generation as JSON.
func resizeMessage(p *corev1.Pod, prefix, errMsg string) string {
	type allocated struct {
		Name      string                      `json:"name"`
		Resources corev1.ResourceRequirements `json:"resources,omitempty"`
	}
	summary := struct {
		InitContainers []allocated `json:"initContainers,omitempty"`
		Containers     []allocated `json:"containers,omitempty"`
		Generation     int64       `json:"generation"`
		Error          string      `json:"error,omitempty"`
	}{Generation: p.Generation, Error: errMsg}
	for _, c := range p.Spec.InitContainers {
		summary.InitContainers = append(summary.InitContainers, allocated{c.Name, c.Resources})
	}
	for _, c := range p.Spec.Containers {
		summary.Containers = append(summary.Containers, allocated{c.Name, c.Resources})
	}
	b, err := json.Marshal(summary)
	if err != nil {
		return prefix
	}
	return prefix + ": " + string(b)
}
