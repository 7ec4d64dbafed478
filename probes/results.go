package probes

import (
	"sort"

	"k8s.io/apimachinery/pkg/types"

	"nodeagent/api"
)

// Ready is the readiness result for a container (true when it has no
// readiness probe). A container ID not seen yet gets its saved result, or
// the initial Failure.
func (m *Manager) Ready(uid types.UID, container, id string) bool {
	return m.result(uid, container, id, Readiness, func(s savedResult) bool { return s.Ready }, true)
}

// Started is whether a container's startup probe succeeded (true when it
// has none).
func (m *Manager) Started(uid types.UID, container, id string) bool {
	return m.result(uid, container, id, Startup, func(s savedResult) bool { return s.Started }, true)
}

func (m *Manager) result(uid types.UID, container, id string, kind Kind, saved func(savedResult) bool, none bool) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	pp, ok := m.pods[uid]
	if !ok {
		return none
	}
	for _, p := range pp.probes {
		if p.kind != kind || p.container.Name != container {
			continue
		}
		if p.containerID == id {
			return p.result == Success
		}
		if s, ok := pp.saved[id]; ok {
			return saved(s)
		}
		return false
	}
	return none
}

// Kill says whether a liveness or startup failure wants the container
// killed, and with which grace period: the probe's
// terminationGracePeriodSeconds when set, else nil (the pod's).
func (m *Manager) Kill(uid types.UID, container, id string) (kind Kind, grace *int64, kill bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	pp, ok := m.pods[uid]
	if !ok || pp.terminating {
		return "", nil, false
	}
	for _, p := range pp.probes {
		if p.container.Name == container && p.containerID == id && p.kind != Readiness && p.result == Failure {
			return p.kind, p.spec.TerminationGracePeriodSeconds, true
		}
	}
	return "", nil, false
}

// Redacted stands for a container's output in a RunReport.
const Redacted = api.Redacted

// RunReport is one run of a probe.
type RunReport = api.ProbeRun

// Report is a probe's state, for the local API.
type Report = api.ProbeReport

// Reports lists a pod's probes, by container and type.
func (m *Manager) Reports(uid types.UID) []Report {
	m.mu.Lock()
	defer m.mu.Unlock()
	pp, ok := m.pods[uid]
	if !ok {
		return nil
	}
	out := make([]Report, 0, len(pp.probes))
	for _, p := range pp.probes {
		r := Report{Container: p.container.Name, Type: p.kind, ContainerID: p.containerID, Result: p.result.String(),
			Consecutive: p.runLength, OnHold: p.onHold, Missed: p.missed}
		if p.last != nil {
			last := *p.last
			r.Last = &last
		}
		out = append(out, r)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Container < out[j].Container })
	return out
}
