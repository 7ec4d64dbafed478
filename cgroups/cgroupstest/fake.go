// Package cgroupstest is an in-memory cgroups.Manager for unit tests: it
// keeps what was written to each cgroup and touches no host hierarchy.
package cgroupstest

import (
	"fmt"
	"io/fs"
	"maps"
	"path"
	"slices"
	"strings"
	"sync"

	"nodeagent/cgroups"
)

// Manager is an in-memory cgroup hierarchy. Safe for concurrent use.
type Manager struct {
	// V is the version it claims (default 2).
	V int

	mu     sync.Mutex
	values map[string]cgroups.ResourceConfig // by cgroupfs path
}

// New returns an empty hierarchy of version v.
func New(v int) *Manager { return &Manager{V: v, values: map[string]cgroups.ResourceConfig{}} }

// Values is what was last written to the cgroup, false when it does not
// exist.
func (m *Manager) Values(name cgroups.Name) (cgroups.ResourceConfig, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	rc, ok := m.values[name.Cgroupfs()]
	return rc, ok
}

// Names lists the cgroups that exist, sorted.
func (m *Manager) Names() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Sorted(maps.Keys(m.values))
}

func (m *Manager) Set(name cgroups.Name, rc *cgroups.ResourceConfig) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	// Parents exist with their children, as mkdir -p makes them.
	for p := name.Cgroupfs(); p != "/" && p != "."; p = path.Dir(p) {
		if _, ok := m.values[p]; !ok {
			m.values[p] = cgroups.ResourceConfig{}
		}
	}
	if rc != nil {
		m.values[name.Cgroupfs()] = *rc
	}
	return nil
}

func (m *Manager) Update(name cgroups.Name, rc *cgroups.ResourceConfig) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.values[name.Cgroupfs()]; !ok {
		return fmt.Errorf("cgroup %s: %w", name.Cgroupfs(), fs.ErrNotExist)
	}
	if rc != nil {
		m.values[name.Cgroupfs()] = *rc
	}
	return nil
}

func (m *Manager) Exists(name cgroups.Name) bool {
	_, ok := m.Values(name)
	return ok
}

// Pids is none: no process runs in an in-memory cgroup.
func (m *Manager) Pids(cgroups.Name) ([]int, error) { return nil, nil }

func (m *Manager) Children(name cgroups.Name) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	prefix := strings.TrimSuffix(name.Cgroupfs(), "/") + "/"
	var out []string
	for p := range m.values {
		if rest, ok := strings.CutPrefix(p, prefix); ok && rest != "" && !strings.Contains(rest, "/") {
			out = append(out, rest)
		}
	}
	slices.Sort(out)
	return out, nil
}

func (m *Manager) Remove(name cgroups.Name) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	p := name.Cgroupfs()
	for q := range m.values {
		if q == p || strings.HasPrefix(q, p+"/") {
			delete(m.values, q)
		}
	}
	return nil
}

// Path is the cgroup's would-be directory; nothing is there.
func (m *Manager) Path(name cgroups.Name) string {
	return path.Join("/nonexistent/cgroupstest", name.Cgroupfs())
}

func (m *Manager) CgroupParent(name cgroups.Name) string { return name.Cgroupfs() }

func (m *Manager) Version() int {
	if m.V == 0 {
		return 2
	}
	return m.V
}

var _ cgroups.Manager = (*Manager)(nil)
