package probes

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"

	"k8s.io/apimachinery/pkg/types"

	"nodeagent/internal/safefile"
)

// savedResult is what survives an agent restart for one container.
type savedResult struct {
	Ready   bool `json:"ready"`
	Started bool `json:"started"`
}

// maxStateFile bounds a pod's saved probe results (a few bytes a container).
const maxStateFile = 1 << 20

func (m *Manager) statePath(uid types.UID) string {
	return filepath.Join(m.opts.StateDir, string(uid)+".json")
}

func (m *Manager) loadSaved(uid types.UID) map[string]savedResult {
	saved := map[string]savedResult{}
	if m.opts.StateDir == "" {
		return saved
	}
	b, err := safefile.Read(m.statePath(uid), maxStateFile)
	if errors.Is(err, os.ErrNotExist) {
		return saved
	}
	if err == nil {
		err = json.Unmarshal(b, &saved)
	}
	if err != nil {
		// Torn or foreign: start from the initial results, and remove it so
		// the next save starts clean instead of this warning repeating.
		m.opts.Log.Warn("saved probe results unreadable; starting from initial results", "file", m.statePath(uid), "err", err)
		os.Remove(m.statePath(uid))
		return map[string]savedResult{}
	}
	return saved
}

// saveLocked writes the pod's current readiness and startup results,
// atomically (write and rename).
func (m *Manager) saveLocked(pp *podProbes) {
	if m.opts.StateDir == "" {
		return
	}
	state := map[string]savedResult{}
	for _, p := range pp.probes {
		if p.containerID == "" {
			continue
		}
		s := state[p.containerID]
		switch p.kind {
		case Readiness:
			s.Ready = p.result == Success
		case Startup:
			s.Started = p.result == Success
		default:
			continue
		}
		state[p.containerID] = s
	}
	pp.saved = state
	b, _ := json.Marshal(state)
	if err := os.MkdirAll(m.opts.StateDir, 0o700); err != nil {
		m.opts.Log.Warn("save probe results", "err", err)
		return
	}
	if err := safefile.Write(m.statePath(pp.uid), b, 0o600); err != nil {
		m.opts.Log.Warn("save probe results", "err", err)
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
