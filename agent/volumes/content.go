package volumes

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"nodeagent/agent/pods/downward"
	"nodeagent/internal/atomicdir"
	"nodeagent/internal/layout"
)

// entry is one file a volume will hold: its mode, how big it is, and its
// bytes, made only when the volume is written.
type entry struct {
	mode fs.FileMode
	size int
	data func() []byte
}

// content is what a volume is made of, resolved without copying the
// objects' data: its files, what identifies their bytes (the objects'
// resourceVersions, the downward values, the token), and when it is due
// to change (zero: when an object changes).
type content struct {
	files map[string]entry // by path
	ids   []string
	due   time.Time
}

// add records a file; a later one at the same path replaces it, as a
// later projection source does in the kubelet.
func (c *content) add(path string, mode fs.FileMode, size int, data func() []byte) {
	if c.files == nil {
		c.files = map[string]entry{}
	}
	c.files[path] = entry{mode, size, data}
}

// key identifies the content: layout, sizes and modes, what the bytes are
// made of, and the owner. The same key means the same files.
func (c *content) key(own atomicdir.Owner) uint64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "%d:%d\x00", own.UID, own.GID)
	for _, p := range slices.Sorted(maps.Keys(c.files)) {
		e := c.files[p]
		fmt.Fprintf(h, "%s\x00%o\x00%d\x00", p, e.mode, e.size)
	}
	for _, id := range c.ids {
		h.Write([]byte(id))
		h.Write([]byte{0})
	}
	return h.Sum64()
}

// pageSize is what the limit counts a file in: tmpfs and the page cache
// hold whole pages, and an empty file still costs an inode.
const pageSize = 4096

// charge is what the files cost the node: each rounded up to pages, at
// least one page.
func (c *content) charge() (bytes int64, files int) {
	for _, e := range c.files {
		bytes += max(1, (int64(e.size)+pageSize-1)/pageSize) * pageSize
		files++
	}
	return bytes, files
}

// contentPlugin is a volume whose files come from the API server or the
// pod itself (configMap, secret, downwardAPI, projected): written whole
// with the atomic writer under the pod's directory, and written again
// when its content changes. What a pod's content volumes hold together is
// bounded by the manager's limit.
type contentPlugin struct {
	name    string
	onTmpfs bool // its content never reaches a disk
	handles func(v *corev1.Volume) bool
	check   func(v *corev1.Volume, p *field.Path, static bool) field.ErrorList
	// resolve adds what v is made of now to c.
	resolve func(ctx context.Context, m *Manager, pod *corev1.Pod, v *corev1.Volume, c *content) error
}

func (p contentPlugin) Name() string                  { return p.name }
func (p contentPlugin) Handles(v *corev1.Volume) bool { return p.handles(v) }
func (p contentPlugin) Live() bool                    { return true }
func (p contentPlugin) TearDown(path string) error    { return removeVolumeDir(path) }

func (p contentPlugin) Check(v *corev1.Volume, path *field.Path, static bool) field.ErrorList {
	return p.check(v, path, static)
}

// UsageDir is none: the node's summary reports disk emptyDirs only.
func (contentPlugin) UsageDir(layout.Root, types.UID, *corev1.Volume) string { return "" }

// SetUp writes the volume unless its content is what was last written.
// The volume is mounted read-only whatever the mount says, as the
// kubelet's plugins for these volumes are. On error, content written
// before keeps serving.
func (p contentPlugin) SetUp(ctx context.Context, m *Manager, pod *corev1.Pod, v *corev1.Volume) (Mounted, error) {
	dir := layout.Root(m.root).Volume(pod.UID, p.name, v.Name)
	c := &content{}
	err := p.resolve(ctx, m, pod, v, c)
	if err == nil {
		err = m.write(pod.UID, dir, v, c, owner(pod), p.onTmpfs)
	}
	if err != nil {
		if _, statErr := os.Lstat(filepath.Join(dir, "..data")); statErr != nil {
			return Mounted{}, err
		}
		return Mounted{Path: dir, ReadOnly: true}, err
	}
	mounted := Mounted{Path: dir, ReadOnly: true}
	if !c.due.IsZero() {
		mounted.Refresh = max(c.due.Sub(m.clock.Now()), time.Second)
	}
	return mounted, nil
}

// mode is a volume's defaultMode, 0644 when unset (the API server's
// default).
func mode(m *int32) fs.FileMode { return modeOr(m, 0o644) }

// modeOr is an item's mode, def when unset.
func modeOr(m *int32, def fs.FileMode) fs.FileMode {
	if m == nil {
		return def
	}
	return fs.FileMode(*m).Perm()
}

// objectData is a configMap's or a secret's data as the informer holds
// it: read in place, copied only into a file being written.
type objectData struct {
	str map[string]string
	bin map[string][]byte
}

func (d objectData) size(k string) (int, bool) {
	if s, ok := d.str[k]; ok {
		return len(s), true
	}
	b, ok := d.bin[k]
	return len(b), ok
}

func (d objectData) bytes(k string) func() []byte {
	return func() []byte {
		if s, ok := d.str[k]; ok {
			return []byte(s)
		}
		return d.bin[k]
	}
}

// version identifies the data: the object's resourceVersion, or (for an
// object without one) a hash of the data itself.
func (d objectData) version(rv string) string {
	if rv != "" {
		return rv
	}
	h := fnv.New64a()
	for _, k := range slices.Sorted(maps.Keys(d.str)) {
		fmt.Fprintf(h, "%s\x00%d\x00%s\x00", k, len(d.str[k]), d.str[k])
	}
	for _, k := range slices.Sorted(maps.Keys(d.bin)) {
		fmt.Fprintf(h, "%s\x00%d\x00", k, len(d.bin[k]))
		h.Write(d.bin[k])
	}
	return fmt.Sprintf("#%x", h.Sum64())
}

// project adds data's keys: all of them as files named after the key, or
// the items' keys at the items' paths. A missing key is an error unless
// the reference is optional.
func project(c *content, kind string, data objectData, items []corev1.KeyToPath, def fs.FileMode, optional bool) error {
	if len(items) == 0 {
		keys := slices.Concat(slices.Collect(maps.Keys(data.str)), slices.Collect(maps.Keys(data.bin)))
		for _, k := range keys {
			n, _ := data.size(k)
			c.add(k, def, n, data.bytes(k))
		}
		return nil
	}
	for _, item := range items {
		n, ok := data.size(item.Key)
		if !ok {
			if optional {
				continue
			}
			return fmt.Errorf("%s references non-existent %s key: %s", kind, map[string]string{"configmap": "config", "secret": "secret"}[kind], item.Key)
		}
		c.add(item.Path, modeOr(item.Mode, def), n, data.bytes(item.Key))
	}
	return nil
}

// object projects a configMap's or a secret's data; a missing object
// projects nothing when the reference is optional.
func (m *Manager) object(ctx context.Context, pod *corev1.Pod, c *content, kind, name string, items []corev1.KeyToPath, def fs.FileMode, optional *bool) error {
	if m.objects == nil {
		return errNoAPI
	}
	opt := optional != nil && *optional
	var data objectData
	var rv string
	var err error
	if kind == "configmap" {
		var cm *corev1.ConfigMap
		if cm, err = m.objects.ConfigMap(ctx, pod.Namespace, name); err == nil {
			data, rv = objectData{str: cm.Data, bin: cm.BinaryData}, cm.ResourceVersion
		}
	} else {
		var s *corev1.Secret
		if s, err = m.objects.Secret(ctx, pod.Namespace, name); err == nil {
			data, rv = objectData{bin: s.Data}, s.ResourceVersion
		}
	}
	if apierrors.IsNotFound(err) && opt {
		c.ids = append(c.ids, kind+"/"+name+" missing")
		return nil
	}
	if err != nil {
		return err
	}
	c.ids = append(c.ids, kind+"/"+name+"@"+data.version(rv))
	return project(c, kind, data, items, def, opt)
}

// downwardAPI writes the pod's own fields; a volume has no pod IP (the
// API server refuses status.podIP there).
func (m *Manager) downwardAPI(pod *corev1.Pod, c *content, items []corev1.DownwardAPIVolumeFile, def fs.FileMode) error {
	for _, item := range items {
		var value string
		var err error
		switch {
		case item.FieldRef != nil:
			value, err = downward.FieldRef(pod, item.FieldRef.FieldPath, m.hostIP, "")
		case item.ResourceFieldRef != nil:
			value, err = downward.ResourceFieldRef(pod, nil, item.ResourceFieldRef, m.allocatable)
		default:
			err = errors.New("neither fieldRef nor resourceFieldRef is set")
		}
		if err != nil {
			return fmt.Errorf("downwardAPI item %q: %w", item.Path, err)
		}
		c.ids = append(c.ids, value)
		c.add(item.Path, modeOr(item.Mode, def), len(value), func() []byte { return []byte(value) })
	}
	return nil
}

func (m *Manager) token(ctx context.Context, pod *corev1.Pod, c *content, p *corev1.ServiceAccountTokenProjection, def fs.FileMode) error {
	if m.objects == nil {
		return errNoAPI
	}
	tok, due, err := m.objects.Token(ctx, pod, p)
	if err != nil {
		return fmt.Errorf("failed to fetch token: %w", err)
	}
	if c.due.IsZero() || due.Before(c.due) {
		c.due = due
	}
	c.ids = append(c.ids, tok)
	c.add(p.Path, def, len(tok), func() []byte { return []byte(tok) })
	return nil
}
