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
	"hash/fnv"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"nodeagent/internal/atomicdir"
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

// Mounter mounts a tmpfs at a directory unless one is there.
type Mounter func(dir string) error

// Manager writes pods' content volumes.
type Manager struct {
	root        string
	objects     Objects // nil: no API server (static pods cannot reference it)
	allocatable corev1.ResourceList
	hostIP      string
	tmpfs       Mounter
	clock       clock.Clock

	mu      sync.Mutex
	written map[types.UID]map[string]uint64 // per pod, the hash of each volume's last content
}

// New returns a manager writing under <root>/pods/<uid>/volumes.
func New(root string, objects Objects, allocatable corev1.ResourceList, hostIP string, tmpfs Mounter, clk clock.Clock) *Manager {
	return &Manager{root: root, objects: objects, allocatable: allocatable, hostIP: hostIP, tmpfs: tmpfs, clock: clk, written: map[types.UID]map[string]uint64{}}
}

// plugin is the kubelet's directory name for a volume type ("" for the
// volumes this package does not write).
func plugin(v *corev1.Volume) string {
	switch {
	case v.ConfigMap != nil:
		return "kubernetes.io~configmap"
	case v.Secret != nil:
		return "kubernetes.io~secret"
	case v.DownwardAPI != nil:
		return "kubernetes.io~downward-api"
	case v.Projected != nil:
		return "kubernetes.io~projected"
	}
	return ""
}

// Handles reports whether v is a volume this package writes.
func Handles(v *corev1.Volume) bool { return plugin(v) != "" }

// Dir is where volume v of the pod lives, in the kubelet's layout.
func Dir(root string, uid types.UID, v *corev1.Volume) string {
	return filepath.Join(root, "pods", string(uid), "volumes", plugin(v), v.Name)
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

// SetUp writes every content volume of pod, or refreshes it. It returns
// how long the content may stand before it must be written again (a token
// due for rotation; 0: only when an object changes) and the volumes it
// could not write.
func (m *Manager) SetUp(ctx context.Context, pod *corev1.Pod) (time.Duration, []Failure) {
	var refresh time.Duration
	var failures []Failure
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		if !Handles(v) {
			continue
		}
		dir := Dir(m.root, pod.UID, v)
		files, due, err := m.content(ctx, pod, v)
		if err == nil {
			err = m.write(pod.UID, dir, v, files, owner(pod))
		}
		if err != nil {
			_, statErr := os.Lstat(filepath.Join(dir, "..data"))
			failures = append(failures, Failure{Volume: v.Name, Err: err, Blocking: statErr != nil})
			continue
		}
		if !due.IsZero() {
			d := max(due.Sub(m.clock.Now()), time.Second)
			if refresh == 0 || d < refresh {
				refresh = d
			}
		}
	}
	return refresh, failures
}

// write writes a volume's files unless they are what this manager last
// wrote there: a pod syncs every few seconds, and its volumes rarely change.
func (m *Manager) write(uid types.UID, dir string, v *corev1.Volume, files map[string]atomicdir.File, own atomicdir.Owner) error {
	sum := hash(files, own)
	m.mu.Lock()
	last, ok := m.written[uid][v.Name]
	m.mu.Unlock()
	if ok && last == sum {
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
		if err := m.tmpfs(dir); err != nil {
			return err
		}
	}
	if _, err := atomicdir.Write(dir, files, own); err != nil {
		return err
	}
	m.mu.Lock()
	if m.written[uid] == nil {
		m.written[uid] = map[string]uint64{}
	}
	m.written[uid][v.Name] = sum
	m.mu.Unlock()
	return nil
}

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
	delete(m.written, uid)
	m.mu.Unlock()
}

// hash identifies a volume's content: paths, modes, data and owner.
func hash(files map[string]atomicdir.File, own atomicdir.Owner) uint64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "%d:%d\x00", own.UID, own.GID)
	for _, p := range slices.Sorted(maps.Keys(files)) {
		f := files[p]
		fmt.Fprintf(h, "%s\x00%o\x00%d\x00", p, f.Mode, len(f.Data))
		h.Write(f.Data)
	}
	return h.Sum64()
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
