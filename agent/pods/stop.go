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
	// Failure, when set, leaves the pod listed, Failed with its reason
	// and message, until its source changes it: an eviction, a
	// preemption, a node shutdown. Otherwise the pod leaves the node and
	// its status goes.
	Failure *Failure
	// KillNow SIGKILLs every process of the pod through its cgroup at once,
	// after the stop is recorded (so its worker restarts nothing that
	// dies): a hard memory threshold's victim, for which a second of grace
	// is a gigabyte. Only with Failure.
	KillNow bool
}

// Failure is why the node stops a pod and leaves it Failed, in the
// kubelet's words.
type Failure struct {
	Reason  string // status.reason: Evicted, Preempting, Terminated
	Message string // status.message
	// Disruption is the message of the DisruptionTarget condition (reason
	// TerminationByKubelet) the pod gets; "" gives none.
	Disruption string
	// Event is the reason of the Warning event the pod gets, with Message
	// and Annotations; "" sends none.
	Event       string
	Annotations map[string]string
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
	if opts.KillNow && opts.Failure != nil && m.killPod != nil && w.pod != nil {
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
	if opts.Failure == nil {
		m.log.Info("stopping pod", args...)
	}
	switch {
	case w == nil:
		w = newWorker(m, uid, pod)
		w.terminating, w.grace = true, opts.Grace
		m.launchLocked(w)
	case opts.Failure != nil:
		w.stopFailed(*opts.Failure, gracePeriod(pod, opts.Grace))
	default:
		w.terminate(opts.Grace)
	}
}
