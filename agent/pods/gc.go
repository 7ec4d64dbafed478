package pods

import (
	"context"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"nodeagent/agent/pleg"
)

// prune is the pod's share of garbage collection: the two newest records
// of every container (current state and lastState) are kept and older
// exited ones removed with their logs; old sandboxes that are not ready and
// hold no containers are removed, as the kubelet's sandbox GC does.
func (w *worker) prune(ctx context.Context, rt *pleg.PodRuntime) {
	for _, c := range deadContainers(rt, 2) {
		w.actions++
		if err := w.m.removeContainer(ctx, c); err != nil {
			w.log.Warn("remove old container", "container", c.GetMetadata().GetName(), "err", err)
			continue
		}
		w.m.removeLogs(c)
	}
	sandboxes := rt.GetSandboxes() // newest first
	for i := 1; i < len(sandboxes); i++ {
		sb := sandboxes[i]
		if sb.State == runtimeapi.PodSandboxState_SANDBOX_READY || holdsContainers(rt, sb.CreatedAt, sandboxes[i-1].CreatedAt) {
			continue
		}
		w.actions++
		if err := w.m.rt.RemovePodSandbox(ctx, sb.Id); err != nil {
			w.log.Warn("remove dead sandbox", "sandbox", shortID(sb.Id), "err", err)
		}
	}
}

// deadContainers are the exited containers beyond the keep newest
// records of each container name.
func deadContainers(rt *pleg.PodRuntime, keep int) []*runtimeapi.ContainerStatus {
	var out []*runtimeapi.ContainerStatus
	seen := map[string]int{}
	for _, c := range rt.GetContainers() { // newest first
		name := c.GetMetadata().GetName()
		seen[name]++
		if seen[name] > keep && c.State == runtimeapi.ContainerState_CONTAINER_EXITED {
			out = append(out, c)
		}
	}
	return out
}

// holdsContainers reports whether some container was created in the
// lifetime of a sandbox, between its creation and the next sandbox's.
func holdsContainers(rt *pleg.PodRuntime, from, until int64) bool {
	for _, c := range rt.GetContainers() {
		if c.CreatedAt >= from && c.CreatedAt < until {
			return true
		}
	}
	return false
}
