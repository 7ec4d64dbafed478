// Package userns gives each pod that asks for a user namespace
// (hostUsers: false) a range of host IDs of its own, as the kubelet's
// userns manager does: ranges of idsPerPod IDs (64 Ki by default) from the
// node's pool, never the first range (host root stays unmapped), picked at
// random, and kept in the pod's directory so an agent restart finds the
// range its running pods use.
package userns

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"nodeagent/internal/layout"
	"nodeagent/internal/safefile"
)

// UnitLength is the granule of a pod's range: idsPerPod is a multiple of
// it, as the kubelet requires.
const UnitLength = 65536

// maxMappingsFile bounds what is read of a pod's mappings file.
const maxMappingsFile = 4096

// Config is the node's pool and what is asked of it.
type Config struct {
	Root      layout.Root
	IDsPerPod uint32 // each pod's range (userNamespaces.idsPerPod)
	// FirstID and Length are the node's pool of host IDs (Pool).
	FirstID, Length uint32
	MaxPods         int
	// Supports reports whether the runtime handler ("" the default) can
	// run a pod in a user namespace, from the runtime's status.
	Supports func(handler string) (bool, error)
}

// Manager hands out and takes back pods' ranges.
type Manager struct {
	cfg   Config
	first int // the pool's first slot: FirstID / IDsPerPod
	slots int

	mu     sync.Mutex
	bySlot map[int]types.UID
	byPod  map[types.UID]int
}

// New checks the pool as the kubelet does and records the ranges that
// pods' directories under root already hold. A range two pods claim, or
// one outside the pool, stops the agent with the file named: a pod would
// otherwise share its IDs with another.
func New(cfg Config) (*Manager, error) {
	n := cfg.IDsPerPod
	switch {
	case n == 0 || n%UnitLength != 0:
		return nil, fmt.Errorf("userNamespaces.idsPerPod %d is not a multiple of %d", n, UnitLength)
	case cfg.FirstID%n != 0:
		return nil, fmt.Errorf("user namespace pool: first ID %d is not a multiple of idsPerPod (%d)", cfg.FirstID, n)
	case cfg.FirstID < n:
		return nil, fmt.Errorf("user namespace pool: first ID %d must be at least idsPerPod (%d): host root would be mapped", cfg.FirstID, n)
	case cfg.Length%n != 0:
		return nil, fmt.Errorf("user namespace pool: length %d is not a multiple of idsPerPod (%d)", cfg.Length, n)
	case uint64(cfg.FirstID)+uint64(cfg.Length) > 1<<32:
		return nil, fmt.Errorf("user namespace pool: %d IDs from %d go past the last ID (%d)", cfg.Length, cfg.FirstID, uint64(1<<32-1))
	case int64(cfg.Length/n) < int64(cfg.MaxPods):
		return nil, fmt.Errorf("user namespace pool: %d IDs from %d hold %d ranges of %d, fewer than maxPods (%d)", cfg.Length, cfg.FirstID, cfg.Length/n, n, cfg.MaxPods)
	}
	m := &Manager{cfg: cfg, first: int(cfg.FirstID / n), slots: int(cfg.Length / n),
		bySlot: map[int]types.UID{}, byPod: map[types.UID]int{}}
	entries, err := os.ReadDir(cfg.Root.Pods())
	if err != nil && !os.IsNotExist(err) {
		return nil, fmt.Errorf("read pod directories: %w", err)
	}
	for _, e := range entries {
		// A set-aside directory (".orphan-…") belongs to a gone pod.
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		uid := types.UID(e.Name())
		if _, err := m.load(uid); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Options is the pod's user namespace for the runtime, as the kubelet's
// GetOrCreateUserNamespaceMappings: the node's for a pod without
// hostUsers: false; else the pod's range, made and written down before the
// first sandbox. A handler without user namespaces gets the kubelet's
// words.
func (m *Manager) Options(pod *corev1.Pod, handler string) (*runtimeapi.UserNamespace, error) {
	if pod.Spec.HostUsers == nil || *pod.Spec.HostUsers {
		return &runtimeapi.UserNamespace{Mode: runtimeapi.NamespaceMode_NODE}, nil
	}
	if ok, err := m.cfg.Supports(handler); err != nil || !ok {
		msg := "can't set `spec.hostUsers: false`, runtime does not support user namespaces"
		if handler != "" {
			msg = fmt.Sprintf("can't set `spec.hostUsers: false`, RuntimeClass handler %q does not support user namespaces", handler)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", msg, err)
		}
		return nil, errors.New(msg)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var first *uint32
	var err error
	if slot, ok := m.byPod[pod.UID]; ok {
		// Held already: the range stays the pod's, its file written again
		// if it went missing.
		id := uint32(m.first+slot) * m.cfg.IDsPerPod
		first = &id
		if _, statErr := os.Stat(m.cfg.Root.UserNamespace(pod.UID)); os.IsNotExist(statErr) {
			err = m.write(pod.UID, id)
		}
	} else if first, err = m.load(pod.UID); err == nil && first == nil {
		first, err = m.allocate(pod.UID)
	}
	if err != nil {
		return nil, err
	}
	ids := []*runtimeapi.IDMapping{{HostId: *first, ContainerId: 0, Length: m.cfg.IDsPerPod}}
	return &runtimeapi.UserNamespace{Mode: runtimeapi.NamespaceMode_POD, Uids: ids, Gids: ids}, nil
}

// Release gives the pod's range back and removes its file; the pod's
// sandbox and containers are gone.
func (m *Manager) Release(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	slot, ok := m.byPod[uid]
	if !ok {
		return
	}
	delete(m.byPod, uid)
	delete(m.bySlot, slot)
	os.Remove(m.cfg.Root.UserNamespace(uid))
}

// InUse is how many pods hold a range.
func (m *Manager) InUse() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.byPod)
}

// allocate picks a free range at random (the kubelet's allocator scans
// from a random slot too) and writes it down before anything uses it.
func (m *Manager) allocate(uid types.UID) (*uint32, error) {
	if len(m.bySlot) >= m.slots {
		return nil, fmt.Errorf("create user namespace: all %d ranges of the pool are in use", m.slots)
	}
	start := rand.IntN(m.slots)
	slot := start
	for {
		if _, used := m.bySlot[slot]; !used {
			break
		}
		slot = (slot + 1) % m.slots
	}
	first := uint32(m.first+slot) * m.cfg.IDsPerPod
	if err := m.write(uid, first); err != nil {
		return nil, fmt.Errorf("create user namespace: %w", err)
	}
	m.bySlot[slot], m.byPod[uid] = uid, slot
	return &first, nil
}

// mappingsFile is the kubelet's userns file in the pod directory.
type mappingsFile struct {
	UIDMappings []idMapping `json:"uidMappings"`
	GIDMappings []idMapping `json:"gidMappings"`
}

type idMapping struct {
	HostID      uint32 `json:"hostId"`
	ContainerID uint32 `json:"containerId"`
	Length      uint32 `json:"length"`
}

func (m *Manager) write(uid types.UID, first uint32) error {
	one := []idMapping{{HostID: first, ContainerID: 0, Length: m.cfg.IDsPerPod}}
	data, err := json.Marshal(mappingsFile{UIDMappings: one, GIDMappings: one})
	if err != nil {
		return err
	}
	path := m.cfg.Root.UserNamespace(uid)
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return err
	}
	return safefile.Write(path, data, 0o600)
}

// load records the range the pod's file holds: nil when it has none.
func (m *Manager) load(uid types.UID) (*uint32, error) {
	path := m.cfg.Root.UserNamespace(uid)
	data, err := safefile.Read(path, maxMappingsFile)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("user namespace of pod %s: %w", uid, err)
	}
	first, err := m.record(uid, data)
	if err != nil {
		return nil, fmt.Errorf("user namespace of pod %s: %s: %w", uid, path, err)
	}
	return &first, nil
}

// record checks a file as the kubelet does (one mapping, the same for
// UIDs and GIDs, root inside mapped, a whole range of the pool) and marks
// its range used by uid.
func (m *Manager) record(uid types.UID, data []byte) (uint32, error) {
	var f mappingsFile
	if err := json.Unmarshal(data, &f); err != nil {
		return 0, fmt.Errorf("invalid mappings file: %w", err)
	}
	if len(f.UIDMappings) != 1 || len(f.GIDMappings) != 1 || f.UIDMappings[0] != f.GIDMappings[0] {
		return 0, errors.New("want one mapping, the same for UIDs and GIDs")
	}
	id := f.UIDMappings[0]
	if id.ContainerID != 0 {
		return 0, fmt.Errorf("containerId %d: want 0 (root inside mapped)", id.ContainerID)
	}
	if id.Length != m.cfg.IDsPerPod {
		return 0, fmt.Errorf("length %d: want idsPerPod (%d)", id.Length, m.cfg.IDsPerPod)
	}
	if id.HostID%m.cfg.IDsPerPod != 0 {
		return 0, fmt.Errorf("hostId %d is not a multiple of idsPerPod (%d)", id.HostID, m.cfg.IDsPerPod)
	}
	slot := int(id.HostID/m.cfg.IDsPerPod) - m.first
	if slot < 0 || slot >= m.slots {
		return 0, fmt.Errorf("hostId %d is outside the pool (%d IDs from %d)", id.HostID, m.cfg.Length, m.cfg.FirstID)
	}
	if prev, ok := m.byPod[uid]; ok {
		if prev != slot {
			return 0, fmt.Errorf("hostId %d differs from the range the pod holds", id.HostID)
		}
		return id.HostID, nil
	}
	if other, used := m.bySlot[slot]; used {
		return 0, fmt.Errorf("hostId %d is already held by pod %s", id.HostID, other)
	}
	m.bySlot[slot], m.byPod[uid] = uid, slot
	return id.HostID, nil
}
