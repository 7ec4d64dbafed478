package pods

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// StopOptions say how a pod stops.
type StopOptions struct {
	// Grace overrides the pod's grace period, in seconds (0: SIGKILL at
	// once).
	Grace *int64
	// Why is logged.
	Why string
	// Eviction, when set, is the eviction manager's message: the pod stays
	// listed, Failed with reason Evicted, until its source changes it.
	// Otherwise the pod leaves the node and its status goes.
	Eviction string
	// KillNow SIGKILLs every process of the pod through its cgroup at once,
	// after the stop is recorded (so its worker restarts nothing that
	// dies): a hard memory threshold's victim, for which a second of grace
	// is a gigabyte. Only with Eviction.
	KillNow bool
}

// Stopped is what StopPod did at once.
type Stopped struct {
	// Killed: the pod's processes were signalled through its cgroup
	// (KillNow, and the agent kills that way); Sigkilled of them.
	Killed    bool
	Sigkilled int
	KillErr   error
}

// StopPod is the one way a pod stops on the node: removed from its source,
// deleted through the API server, evicted, found in the runtime with no
// source wanting it. The worker stops the pod's containers with the grace
// period, then removes what the pod holds on the node.
func (m *Manager) StopPod(uid types.UID, opts StopOptions) (Stopped, error) {
	m.mu.Lock()
	w := m.workers[uid]
	if w == nil {
		m.mu.Unlock()
		return Stopped{}, fmt.Errorf("pod %s: %w", uid, ErrPodNotFound)
	}
	m.stopLocked(uid, w.pod, opts)
	m.mu.Unlock()
	var s Stopped
	if opts.KillNow && opts.Eviction != "" && m.killPod != nil && w.pod != nil {
		s.Killed = true
		s.Sigkilled, s.KillErr = m.killPod(w.pod)
	}
	return s, nil
}

// stopLocked tells the pod's worker to stop it, starting a worker that
// only stops it when the pod has none (the runtime holds it, nothing wants
// it).
func (m *Manager) stopLocked(uid types.UID, pod *corev1.Pod, opts StopOptions) {
	w := m.workers[uid]
	args := []any{"pod_uid", uid, "why", opts.Why}
	if pod != nil {
		args = append(args, "pod", fullName(pod))
	}
	if opts.Grace != nil {
		args = append(args, "grace_period", *opts.Grace)
	}
	if opts.Eviction == "" {
		m.log.Info("stopping pod", args...)
	}
	switch {
	case w == nil:
		w = newWorker(m, uid, pod)
		w.terminating, w.grace = true, opts.Grace
		m.launchLocked(w)
	case opts.Eviction != "":
		w.evict(opts.Eviction, gracePeriod(pod, opts.Grace))
	default:
		w.terminate(opts.Grace)
	}
}
