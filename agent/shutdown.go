package agent

import (
	"context"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"

	"nodeagent/agent/pods"
	"nodeagent/agent/shutdown"
)

// buildShutdown makes graceful node shutdown, when a grace period is set.
func (a *Agent) buildShutdown(_ context.Context, p *parts) error {
	cfg := a.cfg
	var byPriority []shutdown.Group
	for _, g := range cfg.ShutdownGracePeriodByPodPriority {
		byPriority = append(byPriority, shutdown.Group{Priority: g.Priority, GracePeriod: time.Duration(g.ShutdownGracePeriodSeconds) * time.Second})
	}
	groups := shutdown.Groups(byPriority, cfg.ShutdownGracePeriod.Duration, cfg.ShutdownGracePeriodCriticalPods.Duration)
	log := a.log.With("component", "shutdown")
	p.shutdown = shutdown.NewManager(shutdown.Options{
		Groups: groups, Connect: shutdown.ConnectLogind(log), Pods: shutdownPods{p.manager},
		StatePath: filepath.Join(a.opts.RootDir, shutdown.StateFile),
		Changed: func(on bool) {
			ready, changed := p.nodeStatus.SetShuttingDown(on, a.opts.Clock.Now())
			if changed && p.cluster != nil {
				p.cluster.node.SyncNow() // NotReady reaches the scheduler now, not at the next tick
			}
			switch rec := p.recorder; {
			case changed && ready:
				rec.Eventf(rec.NodeRef(), corev1.EventTypeNormal, "NodeReady", "Node %s status is now: NodeReady", a.opts.NodeName)
			case changed:
				rec.Eventf(rec.NodeRef(), corev1.EventTypeWarning, "NodeNotReady", "Node %s status is now: NodeNotReady (%s)", a.opts.NodeName, shutdown.NotReadyMessage)
			}
		},
		Event: func(eventType, reason, message string) {
			p.recorder.Event(p.recorder.NodeRef(), eventType, reason, message)
		},
		Clock: a.opts.Clock, Log: log,
	})
	return nil
}

// runShutdown watches for the node's shutdown; a first start that fails is
// logged and the agent goes on without, as the kubelet.
func (a *Agent) runShutdown(ctx context.Context, p *parts) {
	if p.shutdown == nil {
		return
	}
	p.shutdown.Run(ctx, func(err error) {
		if err != nil {
			a.log.Error("failed to start node shutdown manager; pods will not be stopped gracefully when the node shuts down", "err", err)
		}
	})
}

// shutdownPods is the pod manager as the shutdown manager uses it.
type shutdownPods struct{ *pods.Manager }

// shutdownPollPeriod is how often a stopping pod is checked.
const shutdownPollPeriod = 200 * time.Millisecond

func (s shutdownPods) Shutdown(ctx context.Context, pod *corev1.Pod, grace time.Duration) {
	secs := int64(grace / time.Second)
	f := &pods.Failure{Reason: shutdown.Reason, Message: shutdown.Message, Disruption: shutdown.Message}
	if _, err := s.StopPod(pod.UID, pods.StopOptions{Grace: &secs, Failure: f, Why: "node shutdown"}); err != nil {
		return
	}
	t := time.NewTicker(shutdownPollPeriod)
	defer t.Stop()
	for !s.Released(pod.UID) {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (p *parts) shutdownMetrics() []prometheus.Collector {
	if p.shutdown == nil {
		return nil
	}
	return p.shutdown.Metrics()
}
