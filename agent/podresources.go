package agent

import (
	"context"

	"nodeagent/agent/podresources"
	"nodeagent/internal/layout"
)

// buildPodResources makes the pod resources API over the pod manager, the
// device plugins and the CPU manager.
func (a *Agent) buildPodResources(_ context.Context, p *parts) error {
	var cpus podresources.CPUs
	if p.cpus != nil {
		cpus = p.cpus
	}
	p.podRes = podresources.New(p.manager, p.devices, cpus, a.log.With("component", "podresources"))
	return nil
}

// runPodResources serves it on <root-dir>/pod-resources/kubelet.sock; a
// socket that cannot be served is logged, as the device plugins'.
func (a *Agent) runPodResources(ctx context.Context, p *parts) {
	if err := p.podRes.Run(ctx, layout.Root(a.opts.RootDir).PodResources()); err != nil {
		a.log.Warn("the pod resources API is not served", "err", err)
	}
}
