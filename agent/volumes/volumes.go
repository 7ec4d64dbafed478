// Package volumes writes the volumes whose content comes from the API
// server or from the pod itself: configMap, secret, downwardAPI and
// projected (configMap, secret, downwardAPI, serviceAccountToken
// sources). Each is a directory under the pod's, written whole with the
// atomic writer and written again when its content changes; secret and
// projected volumes sit on a tmpfs, so their content never reaches a disk.
//
// emptyDir and hostPath volumes are the pod worker's (they have no
// content to keep current).
package volumes

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"nodeagent/internal/atomicdir"
	"nodeagent/internal/bytesize"
	"nodeagent/internal/layout"
)

// Objects reads what volumes reference in the API server. Missing objects
// are apierrors NotFound.
type Objects interface {
	ConfigMap(ctx context.Context, namespace, name string) (*corev1.ConfigMap, error)
	Secret(ctx context.Context, namespace, name string) (*corev1.Secret, error)
	// Token returns a token of the pod's service account bound to the pod,
	// and when it is due for rotation.
	Token(ctx context.Context, pod *corev1.Pod, p *corev1.ServiceAccountTokenProjection) (string, time.Time, error)
}

// Mounter mounts a tmpfs of at most size bytes at a directory unless one
// is there.
type Mounter func(dir string, size int64) error

// DefaultContentLimit is what a pod's configMap, secret, downwardAPI and
// projected volumes may hold together by default: sixteen of the largest
// configMaps or secrets the API server stores (1 MiB each).
const DefaultContentLimit = 16 << 20

// Config is what a Manager needs.
type Config struct {
	Root        string  // volumes live under <Root>/pods/<uid>/volumes
	Objects     Objects // nil: no API server (static pods cannot reference it)
	Allocatable corev1.ResourceList
	HostIP      string
	Tmpfs       Mounter
	Clock       clock.Clock
	// Limit bounds what a pod's content volumes hold together, each file
	// counted in whole pages (at least one); 0 is DefaultContentLimit.
	Limit int64
}

// Manager writes pods' content volumes.
type Manager struct {
	root        string
	objects     Objects
	allocatable corev1.ResourceList
	hostIP      string
	tmpfs       Mounter
	clock       clock.Clock
	limit       int64

	mu    sync.Mutex
	state map[types.UID]map[string]volumeState // per pod, per volume
}

// volumeState is what the manager last made of a volume: the content's
// key, its charge, whether that content is what the disk holds, and the
// charge of what the disk holds (an older content, when the newer one was
// refused).
type volumeState struct {
	key     uint64
	charge  int64
	files   int
	written bool
	onDisk  int64
}

// New returns a manager writing under <root>/pods/<uid>/volumes.
func New(cfg Config) *Manager {
	limit := cfg.Limit
	if limit <= 0 {
		limit = DefaultContentLimit
	}
	return &Manager{root: cfg.Root, objects: cfg.Objects, allocatable: cfg.Allocatable, hostIP: cfg.HostIP, tmpfs: cfg.Tmpfs, clock: cfg.Clock,
		limit: limit, state: map[types.UID]map[string]volumeState{}}
}

// plugin is the kubelet's directory name for a volume type ("" for the
// volumes this package does not write).
func plugin(v *corev1.Volume) string {
	switch {
	case v.ConfigMap != nil:
		return layout.PluginConfigMap
	case v.Secret != nil:
		return layout.PluginSecret
	case v.DownwardAPI != nil:
		return layout.PluginDownwardAPI
	case v.Projected != nil:
		return layout.PluginProjected
	}
	return ""
}

// Handles reports whether v is a volume this package writes.
func Handles(v *corev1.Volume) bool { return plugin(v) != "" }

// Dir is where volume v of the pod lives, in the kubelet's layout.
func Dir(root string, uid types.UID, v *corev1.Volume) string {
	return layout.Root(root).Volume(uid, plugin(v), v.Name)
}

// Failure is a volume that could not be written.
type Failure struct {
	Volume string
	Err    error
	// Blocking: the volume was never written, so the pod's containers
	// cannot start. A volume written before keeps its old content.
	Blocking bool
}

// Error is the kubelet's FailedMount message.
func (f Failure) Error() string {
	return fmt.Sprintf("MountVolume.SetUp failed for volume %q : %v", f.Volume, f.Err)
}

// ErrTooLarge is content over the limit: nothing of it is written.
var ErrTooLarge = errors.New("content over the limit")

// SetUp writes every content volume of pod, or refreshes it. It returns
// how long the content may stand before it must be written again (a token
// due for rotation; 0: only when an object changes) and the volumes it
// could not write. A volume whose content is what was last written is
// left alone without its bytes being read; one that would take the pod's
// content volumes past the limit is refused before anything is written.
func (m *Manager) SetUp(ctx context.Context, pod *corev1.Pod) (time.Duration, []Failure) {
	var refresh time.Duration
	var failures []Failure
	own := owner(pod)
	// What the pod's content volumes hold now; a volume refused keeps its
	// older content, which still counts.
	var held int64
	m.mu.Lock()
	for _, st := range m.state[pod.UID] {
		held += st.onDisk
	}
	m.mu.Unlock()
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		if !Handles(v) {
			continue
		}
		dir := Dir(m.root, pod.UID, v)
		c, err := m.resolve(ctx, pod, v)
		if err == nil {
			err = m.write(pod.UID, dir, v, c, own, &held)
		}
		if err != nil {
			_, statErr := os.Lstat(filepath.Join(dir, "..data"))
			failures = append(failures, Failure{Volume: v.Name, Err: err, Blocking: statErr != nil})
			continue
		}
		if !c.due.IsZero() {
			d := max(c.due.Sub(m.clock.Now()), time.Second)
			if refresh == 0 || d < refresh {
				refresh = d
			}
		}
	}
	return refresh, failures
}

// write writes a volume's files unless they are what this manager last
// wrote there (a pod syncs every few seconds, and its volumes rarely
// change), or refuses them when, in place of what the volume holds now and
// with what the pod's other content volumes hold (held is all of it), they
// pass the limit; held is updated.
func (m *Manager) write(uid types.UID, dir string, v *corev1.Volume, c *content, own atomicdir.Owner, held *int64) error {
	key := c.key(own)
	m.mu.Lock()
	st, ok := m.state[uid][v.Name]
	m.mu.Unlock()
	if !ok || st.key != key {
		st.key, st.written = key, false
		st.charge, st.files = c.charge()
	}
	others := *held - st.onDisk
	if others+st.charge > m.limit {
		m.remember(uid, v.Name, st)
		if others > 0 {
			return fmt.Errorf("%w: %s in %d files, and %s in the pod's other content volumes: more than the %s a pod's configMap, secret, downwardAPI and projected volumes may hold together (--pod-volume-content-limit)",
				ErrTooLarge, size(st.charge), st.files, size(others), size(m.limit))
		}
		return fmt.Errorf("%w: %s in %d files, more than the %s a pod's configMap, secret, downwardAPI and projected volumes may hold together (--pod-volume-content-limit)",
			ErrTooLarge, size(st.charge), st.files, size(m.limit))
	}
	if st.written {
		if _, err := os.Lstat(filepath.Join(dir, "..data")); err == nil {
			return nil
		}
	}
	// World-writable as the kubelet's wrapped emptyDir: users other than
	// root must reach the files (the container mounts it read-only).
	if err := MkdirMode(dir, 0o777); err != nil {
		return err
	}
	if v.Secret != nil || v.Projected != nil {
		// Room for the old set and the new one side by side, as the atomic
		// writer swaps them, and the directories.
		if err := m.tmpfs(dir, 2*m.limit+1<<20); err != nil {
			return err
		}
	}
	files := make(map[string]atomicdir.File, len(c.files))
	for p, e := range c.files {
		files[p] = atomicdir.File{Data: e.data(), Mode: e.mode}
	}
	if _, err := atomicdir.Write(dir, files, own); err != nil {
		return err
	}
	st.written, st.onDisk = true, st.charge
	*held = others + st.charge
	m.remember(uid, v.Name, st)
	return nil
}

func (m *Manager) remember(uid types.UID, volume string, st volumeState) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.state[uid] == nil {
		m.state[uid] = map[string]volumeState{}
	}
	m.state[uid][volume] = st
}

// size prints a byte count for people.
func size(n int64) string { return bytesize.Binary(uint64(max(n, 0))) }

// MkdirMode creates a volume directory with exactly mode, whatever the
// umask.
func MkdirMode(dir string, mode os.FileMode) error {
	if err := os.MkdirAll(dir, mode); err != nil {
		return err
	}
	return os.Chmod(dir, mode)
}

// Forget drops what the manager remembers of a pod whose worker ended.
func (m *Manager) Forget(uid types.UID) {
	m.mu.Lock()
	delete(m.state, uid)
	m.mu.Unlock()
}

// owner is the pod's fsGroup, which gets read access to its volumes.
func owner(pod *corev1.Pod) atomicdir.Owner {
	if sc := pod.Spec.SecurityContext; sc != nil && sc.FSGroup != nil {
		return atomicdir.Owner{UID: -1, GID: int(*sc.FSGroup)}
	}
	return atomicdir.NoOwner
}

// errNoAPI is what a pod without an API server behind it gets for an API
// reference (admission refuses such static pods first).
var errNoAPI = errors.New("the agent is not connected to an API server")
