// Package volumes is the agent's volume manager, in the kubelet's shape:
// one Plugin per volume type sets up, tears down and measures its
// volumes (emptyDir, hostPath, configMap, secret, downwardAPI,
// projected). A pod's volumes are set up before its sandbox and torn down
// once its containers are gone; building a container's config only looks
// up where a volume is. Volumes whose content comes from the API server or
// the pod itself are written whole with the atomic writer and written
// again when their content changes; secret and projected volumes sit on a
// tmpfs, so their content never reaches a disk. SubPaths are bound here
// too, beneath the volume they name.
package volumes

import (
	"context"
	"errors"
	"fmt"
	"maps"
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
	"nodeagent/internal/mounts"
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

	mu      sync.Mutex
	state   map[types.UID]map[string]volumeState // content volumes, per pod, per volume
	mounted map[types.UID]map[string]mountedVolume
}

// mountedVolume is a volume set up for a pod, and its plugin.
type mountedVolume struct {
	Mounted
	plugin Plugin
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
	tmpfs := cfg.Tmpfs
	if tmpfs == nil {
		tmpfs = mountTmpfs
	}
	return &Manager{root: cfg.Root, objects: cfg.Objects, allocatable: cfg.Allocatable, hostIP: cfg.HostIP, tmpfs: tmpfs, clock: cfg.Clock,
		limit: limit, state: map[types.UID]map[string]volumeState{}, mounted: map[types.UID]map[string]mountedVolume{}}
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

// SetUp sets up every volume of pod that is not set up yet, and brings
// the content of those that follow objects up to date. It returns how
// long the content may stand before it must be written again (a token
// due for rotation; 0: only when an object changes) and the volumes it
// could not set up.
func (m *Manager) SetUp(ctx context.Context, pod *corev1.Pod) (time.Duration, []Failure) {
	var refresh time.Duration
	var failures []Failure
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		p := pluginFor(v)
		if p == nil {
			// Admission refuses such a pod first.
			failures = append(failures, Failure{Volume: v.Name, Err: errors.New("unsupported volume type"), Blocking: true})
			continue
		}
		if _, ok := m.Mount(pod.UID, v.Name); ok && !p.Live() {
			continue
		}
		mounted, err := p.SetUp(ctx, m, pod, v)
		m.record(pod.UID, v.Name, mountedVolume{mounted, p})
		if err != nil {
			failures = append(failures, Failure{Volume: v.Name, Err: err, Blocking: mounted.Path == ""})
			continue
		}
		if d := mounted.Refresh; d > 0 && (refresh == 0 || d < refresh) {
			refresh = d
		}
	}
	return refresh, failures
}

// record remembers where a pod's volume is ("": nowhere usable).
func (m *Manager) record(uid types.UID, name string, v mountedVolume) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if v.Path == "" {
		delete(m.mounted[uid], name)
		return
	}
	if m.mounted[uid] == nil {
		m.mounted[uid] = map[string]mountedVolume{}
	}
	m.mounted[uid][name] = v
}

// Mount is where the pod's volume name is set up, false when it is not.
func (m *Manager) Mount(uid types.UID, name string) (Mounted, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.mounted[uid][name]
	return v.Mounted, ok
}

// SubPath binds sub, beneath the pod's volume at volumePath, at the
// target of the container's index-th mount and returns the target.
func (m *Manager) SubPath(uid types.UID, volume, container string, index int, volumePath, sub string) (string, error) {
	target := layout.Root(m.root).SubPath(uid, volume, container, index)
	return target, bindSubPath(volumePath, sub, target)
}

// TearDown tears down a pod whose containers are gone: its subPath binds,
// each volume through its plugin, then what an earlier agent set up and
// this one never saw. The pod's volumes are forgotten once all are gone.
func (m *Manager) TearDown(uid types.UID) error {
	root := layout.Root(m.root)
	// The binds first: they show files of the volumes.
	if err := mounts.RemoveAll(root.SubPaths(uid)); err != nil {
		return err
	}
	m.mu.Lock()
	mounted := maps.Clone(m.mounted[uid])
	m.mu.Unlock()
	var errs []error
	for name, v := range mounted {
		if err := v.plugin.TearDown(v.Path); err != nil {
			errs = append(errs, fmt.Errorf("volume %s: %w", name, err))
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	if err := mounts.UnmountUnder(root.Volumes(uid)); err != nil {
		return err
	}
	if err := os.RemoveAll(root.Volumes(uid)); err != nil {
		return err
	}
	m.Forget(uid)
	return nil
}

// write writes a volume's files unless they are what this manager last
// wrote there (a pod syncs every few seconds, and its volumes rarely
// change), or refuses them when, in place of what the volume holds now and
// with what the pod's other content volumes hold, they pass the limit.
func (m *Manager) write(uid types.UID, dir string, v *corev1.Volume, c *content, own atomicdir.Owner, onTmpfs bool) error {
	key := c.key(own)
	m.mu.Lock()
	st, ok := m.state[uid][v.Name]
	// What the pod's other content volumes hold now; a volume refused
	// keeps its older content, which still counts.
	var others int64
	for name, o := range m.state[uid] {
		if name != v.Name {
			others += o.onDisk
		}
	}
	m.mu.Unlock()
	if !ok || st.key != key {
		st.key, st.written = key, false
		st.charge, st.files = c.charge()
	}
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
	if err := mkdirMode(dir, 0o777); err != nil {
		return err
	}
	if onTmpfs {
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

// mkdirMode creates a volume directory with exactly mode, whatever the
// umask.
func mkdirMode(dir string, mode os.FileMode) error {
	if err := os.MkdirAll(dir, mode); err != nil {
		return err
	}
	return os.Chmod(dir, mode)
}

// Forget drops what the manager remembers of a pod whose worker ended.
func (m *Manager) Forget(uid types.UID) {
	m.mu.Lock()
	delete(m.state, uid)
	delete(m.mounted, uid)
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
