package probes

import (
	"container/heap"
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// firstDue is when a new container's probe first runs. A readiness probe
// runs as soon as its initial delay is over, since a failed readiness run
// costs nothing. Liveness and startup probes, which kill, run on ticks of
// their period counted from when the pod was added, at the first tick after
// the initial delay, as the kubelet's per-probe ticker does; a server
// that takes a moment to listen is not killed for it. For a container that
// was running before this agent started, the first run falls at a random
// point of the first period, so a restarted agent does not probe
// everything at once.
func (m *Manager) firstDue(p *probe, now time.Time) time.Time {
	period := time.Duration(p.spec.PeriodSeconds) * time.Second
	if !p.startedAt.IsZero() && p.startedAt.Before(m.born) {
		return now.Add(m.opts.Jitter(period))
	}
	due := p.startedAt.Add(time.Duration(p.spec.InitialDelaySeconds) * time.Second)
	if due.Before(now) {
		due = now
	}
	if p.kind == Readiness || period <= 0 {
		return due
	}
	ticks := (due.Sub(p.registered) + period - 1) / period
	return p.registered.Add(max(ticks, 1) * period)
}

// dispatchLocked starts p's run if it should run now and re-queues it for
// its next period. p is at the head of the queue.
func (m *Manager) dispatchLocked(ctx context.Context, p *probe, now time.Time) {
	heap.Pop(&m.queue)
	if !p.running {
		return // UpdatePod re-queues it when a container runs again
	}
	period := time.Duration(p.spec.PeriodSeconds) * time.Second
	if p.inflight {
		p.missed++
		m.Metrics.addMissed(p.kind)
	} else if m.shouldRunLocked(p) {
		p.inflight = true
		t := Target{PodIP: p.pod.podIP, ContainerID: p.containerID, Container: p.container}
		go m.execute(ctx, p, t)
	}
	p.due = p.due.Add(period)
	if !p.due.After(now) {
		p.due = now.Add(period)
	}
	heap.Push(&m.queue, p)
}

// shouldRunLocked is the kubelet's doProbe gating.
func (m *Manager) shouldRunLocked(p *probe) bool {
	if p.onHold || p.containerID == "" {
		return false
	}
	if p.pod.terminating && p.kind != Readiness {
		return false // a terminating pod is never restarted by a probe
	}
	if p.kind != Startup && !m.startedLocked(p.pod, p.container.Name) {
		return false // until the startup probe succeeds only it runs
	}
	if p.pod.podIP == "" && needsIP(p.spec) {
		return false // the sandbox has no IP yet (or lost it)
	}
	return true
}

func needsIP(p *corev1.Probe) bool {
	return (p.HTTPGet != nil && p.HTTPGet.Host == "") || (p.TCPSocket != nil && p.TCPSocket.Host == "") || p.GRPC != nil
}

// execute runs one probe and applies its result.
func (m *Manager) execute(ctx context.Context, p *probe, t Target) {
	start := m.opts.Clock.Now()
	out := m.run(ctx, p.spec, t)
	took := m.opts.Clock.Since(start)
	if ctx.Err() != nil {
		return
	}
	m.Metrics.observe(p.kind, out.result, took)

	m.mu.Lock()
	p.inflight = false
	if !p.removed {
		m.Metrics.observeContainer(p.kind, out.result, took, p.pod.pod, p.container.Name)
	}
	if p.removed || p.containerID != t.ContainerID {
		m.mu.Unlock()
		return // the container changed under the run: its result is moot
	}
	pod, name := p.pod.pod, p.container.Name
	// The local API shows the agent's words, never the container's output.
	shown := out.message
	if out.output != "" {
		shown += Redacted
	}
	p.last = &RunReport{Time: start, Result: out.result.String(), Message: truncate(shown, 512), Duration: took.Seconds()}
	result := out.result
	if result == Unknown {
		result = Failure // the kubelet's mapping of Unknown
	}
	if result == p.lastRun {
		p.runLength++
	} else {
		p.lastRun, p.runLength = result, 1
	}
	threshold := p.spec.SuccessThreshold
	if result == Failure {
		threshold = p.spec.FailureThreshold
	}
	changed := false
	var siblings bool
	if int32(p.runLength) >= threshold {
		changed = p.result != result
		p.result = result
		if (p.kind == Liveness && result == Failure) || p.kind == Startup {
			p.onHold = true
		}
		if p.kind == Startup && result == Success {
			siblings = true
			m.dueNowLocked(p.pod, name)
		}
		if changed && p.kind != Liveness {
			m.saveLocked(p.pod)
		}
	}
	m.mu.Unlock()

	kind := strings.ToLower(string(p.kind))
	switch {
	case out.result == Unknown:
		m.opts.Event(pod, name, corev1.EventTypeWarning, "Unhealthy", fmt.Sprintf("%s probe errored and resulted in %s state: %s", p.kind, Failure, out.message), out.output)
	case out.result == Failure:
		m.opts.Event(pod, name, corev1.EventTypeWarning, "Unhealthy", fmt.Sprintf("%s probe failed: %s", p.kind, out.message), out.output)
	case out.warning:
		m.opts.Event(pod, name, corev1.EventTypeWarning, "ProbeWarning", fmt.Sprintf("%s probe warning: %s", p.kind, out.message), out.output)
	}
	if out.output != "" && out.result != Success {
		m.opts.Log.Debug("probe output", "pod", pod.Namespace+"/"+pod.Name, "container", name, "probe", kind, "output", truncate(out.output, 1024))
	}
	if changed {
		m.opts.Log.Info("probe result changed", "pod", pod.Namespace+"/"+pod.Name, "container", name, "probe", kind, "result", result.String())
		m.opts.Changed(pod.UID, p.kind)
	}
	if siblings {
		m.wake()
	}
}

// dueNowLocked moves a container's liveness and readiness probes to now,
// once its startup probe succeeded.
func (m *Manager) dueNowLocked(pp *podProbes, container string) {
	now := m.opts.Clock.Now()
	for _, q := range pp.probes {
		if q.container.Name == container && q.kind != Startup && q.heapIndex >= 0 {
			q.due = now
			heap.Fix(&m.queue, q.heapIndex)
		}
	}
}

// queue is a min-heap of probes by due time.
type queue []*probe

func (q queue) Len() int { return len(q) }

func (q queue) Less(i, j int) bool { return q[i].due.Before(q[j].due) }

func (q queue) Swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].heapIndex, q[j].heapIndex = i, j
}

func (q *queue) Push(x any) {
	p := x.(*probe)
	p.heapIndex = len(*q)
	*q = append(*q, p)
}

func (q *queue) Pop() any {
	old := *q
	p := old[len(old)-1]
	old[len(old)-1] = nil
	p.heapIndex = -1
	*q = old[:len(old)-1]
	return p
}
