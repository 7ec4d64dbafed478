package source

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"nodeagent/internal/safefile"
	"nodeagent/manifest"
)

// File reads static pod manifests from one directory, as the kubelet does:
// every regular file not starting with ".", sorted, not recursive, one Pod
// per file. It rescans on inotify events (debounced) and every period.
type File struct {
	dir    string
	node   string
	period time.Duration
	log    *slog.Logger

	reported map[string]string // file -> last logged problem, so each is logged once
	owners   map[string]string // namespace/name -> file that defined it in the last scan
	parsed   map[string]parseResult
	// deletes reach the scanning goroutine: a deletion and the scans are
	// serialized, so no scan taken before a manifest went is sent after.
	deletes chan deletion
	stopped chan struct{} // closed when Run returns
}

// deletion is a request of Delete.
type deletion struct {
	namespace, name string
	grace           *int64
	done            chan error
}

// parseResult caches a file's parse, valid while its size and mtime hold.
type parseResult struct {
	size     int64
	mtime    time.Time
	pod      *corev1.Pod
	warnings []string
	err      error
}

// ErrInvalidManifest is a manifest Apply refused: the caller's input.
var ErrInvalidManifest = errors.New("invalid manifest")

// Apply validates data as a manifest (ParseManifest) and writes it into
// the directory as <metadata.name>.yaml, durably, unless the file already
// holds exactly that. It is nodectl apply, done by the agent for a root
// caller of its control socket: the directory is the agent's own.
func (f *File) Apply(data []byte) (name, file, result string, err error) {
	probe := filepath.Join(f.dir, "apply.yaml")
	pod, _, err := manifest.ParseManifest(data, probe, f.node)
	if err != nil {
		return "", "", "", fmt.Errorf("%w: %w", ErrInvalidManifest, err)
	}
	name = strings.TrimSuffix(pod.Name, "-"+strings.ToLower(f.node))
	file = filepath.Join(f.dir, name+".yaml")
	result = "created"
	if old, err := safefile.Read(file, manifest.MaxManifestSize); err == nil {
		if string(old) == string(data) {
			return name, file, "unchanged", nil
		}
		result = "configured"
	}
	if err := os.MkdirAll(f.dir, 0o755); err != nil {
		return "", "", "", err
	}
	if err := safefile.Write(file, data, 0o644); err != nil {
		return "", "", "", fmt.Errorf("write %s: %w", file, err)
	}
	return name, file, result, nil
}

// ErrNotManifest is a path Remove refuses: not an entry of the static pod
// directory.
var ErrNotManifest = errors.New("not a manifest of the static pod directory")

// Remove deletes file, which must be an entry of the directory itself (the
// source does not recurse): the entry is unlinked relative to the opened
// directory, so a link there is removed, never followed, and a path that
// names anything else is refused. A file already gone is not an error.
func (f *File) Remove(file string) error {
	dir := filepath.Clean(f.dir)
	base := filepath.Base(file)
	if !filepath.IsAbs(file) || filepath.Dir(file) != dir || base == "." || base == ".." || base == "/" {
		return fmt.Errorf("%s: %w %s", file, ErrNotManifest, dir)
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open static pod directory %s: %w", dir, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstatat(fd, base, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		return fmt.Errorf("%s: %w", file, err)
	}
	if t := st.Mode & unix.S_IFMT; t != unix.S_IFREG && t != unix.S_IFLNK {
		return fmt.Errorf("%s: %w %s (not a file)", file, ErrNotManifest, dir)
	}
	if err := unix.Unlinkat(fd, base, 0); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("remove %s: %w", file, err)
	}
	return nil
}

// ErrNoManifest is a pod Delete did not find: no manifest of the
// directory defines it.
var ErrNoManifest = errors.New("no static pod manifest defines it")

// Delete removes the manifest that defines the pod namespace/name (see
// Remove) and returns once the source has sent the desired set without
// it, the pod's grace period overridden by grace when set (0: SIGKILL at
// once). It is nodectl delete, done by the agent for a root caller of its
// control socket. It fails when the source is not running.
func (f *File) Delete(ctx context.Context, namespace, name string, grace *int64) error {
	req := deletion{namespace: namespace, name: name, grace: grace, done: make(chan error, 1)}
	select {
	case f.deletes <- req:
	case <-f.stopped:
		return errors.New("the static pod source is stopped")
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-req.done:
		return err
	case <-f.stopped:
		return errors.New("the static pod source is stopped")
	}
}

// delete removes the manifest of req's pod and scans: the update without
// the pod carries the grace override.
func (f *File) delete(req deletion, last *Update) (Update, error) {
	key := req.namespace + "/" + req.name
	file, ok := f.owners[key]
	if !ok {
		return Update{}, fmt.Errorf("pod %s: %w in %s", key, ErrNoManifest, f.dir)
	}
	var uid types.UID
	if last != nil {
		for _, p := range last.Pods {
			if p.Namespace == req.namespace && p.Name == req.name {
				uid = p.UID
			}
		}
	}
	if err := f.Remove(file); err != nil {
		return Update{}, fmt.Errorf("remove manifest of %s: %w", key, err)
	}
	args := []any{"pod", key, "pod_uid", uid, "manifest", file}
	if req.grace != nil {
		args = append(args, "grace_period", *req.grace)
	}
	f.log.Info("pod deleted on request", args...)
	u := f.Scan()
	if req.grace != nil && uid != "" {
		u.Grace = map[types.UID]int64{uid: *req.grace}
	}
	return u, nil
}

// debounce groups the events of one editor save or copy into one scan.
const debounce = 10 * time.Millisecond

// NewFile returns a source for dir on node, rescanning every period.
func NewFile(dir, node string, period time.Duration, log *slog.Logger) *File {
	return &File{dir: dir, node: node, period: period, log: log, reported: map[string]string{}, owners: map[string]string{}, parsed: map[string]parseResult{},
		deletes: make(chan deletion), stopped: make(chan struct{})}
}

// Run sends the desired set to out at once and again whenever it changes,
// until ctx is done. It creates the directory when missing.
func (f *File) Run(ctx context.Context, out chan<- Update) {
	defer close(f.stopped)
	if err := os.MkdirAll(f.dir, 0o755); err != nil {
		f.log.Warn("cannot create static pod directory; will keep rescanning", "dir", f.dir, "err", err)
	}
	events := make(<-chan fsnotify.Event)
	errs := make(<-chan error)
	watcher, err := fsnotify.NewWatcher()
	if err == nil {
		if err = watcher.Add(f.dir); err == nil {
			events, errs = watcher.Events, watcher.Errors
		}
		defer watcher.Close()
	}
	if err != nil {
		f.log.Warn("cannot watch static pod directory; relying on the periodic rescan", "dir", f.dir, "period", f.period, "err", err)
	}
	f.watch(ctx, out, events, errs)
}

// watch scans at once and again on every event burst, watcher error and
// tick, sending each changed desired set to out.
func (f *File) watch(ctx context.Context, out chan<- Update, events <-chan fsnotify.Event, errs <-chan error) {
	ticker := time.NewTicker(f.period)
	defer ticker.Stop()
	settle := time.NewTimer(debounce)
	settle.Stop()
	settling := false

	// next blocks until a scan is due: at once on the first event of a
	// burst (an atomic rename is complete), once more when the burst
	// settles, on every periodic rescan, and for a deletion (its update is
	// ready). It is false when ctx is done.
	var last *Update
	var deleted *deletion
	var ready Update
	next := func() bool {
		for {
			select {
			case <-ctx.Done():
				return false
			case req := <-f.deletes:
				u, err := f.delete(req, last)
				if err != nil {
					req.done <- err
					continue
				}
				deleted, ready = &req, u
				return true
			case <-events:
				settle.Reset(debounce)
				if !settling {
					settling = true
					return true
				}
			case err := <-errs:
				// Read, or the watcher stops delivering events. An
				// overflow lost events: rescan now, not at the next tick.
				if !errors.Is(err, fsnotify.ErrEventOverflow) {
					f.log.Warn("watching the static pod directory", "dir", f.dir, "err", err)
				}
				return true
			case <-ticker.C:
				return true
			case <-settle.C:
				settling = false
				return true
			}
		}
	}
	for scan := true; scan; scan = next() {
		var u Update
		if deleted != nil {
			u = ready
		} else {
			u = f.Scan()
		}
		if last != nil && sameUpdate(*last, u) && deleted == nil {
			continue
		}
		last = &u
		select {
		case out <- u:
		case <-ctx.Done():
			return
		}
		if deleted != nil {
			deleted.done <- nil
			deleted = nil
		}
	}
}

var _ Source = (*File)(nil)

// Name implements Source: static pods come from "file", as the kubelet's
// config.source says.
func (f *File) Name() string { return manifest.SourceFile }

// Scan reads the directory once. A file that cannot become a pod is
// reported in Update.Errors (and logged once per distinct problem) and
// never affects the other files. When two files name the same pod, the file
// that defined it before keeps it (a new duplicate never displaces a running
// pod); among new files the first in sorted order wins.
func (f *File) Scan() Update {
	u := Update{Source: f.Name()}
	entries, err := os.ReadDir(f.dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		f.report(f.dir, fmt.Sprintf("read static pod directory: %v", err))
		return u
	}
	type parsed struct {
		file string
		pod  *corev1.Pod
	}
	var candidates []parsed
	current := map[string]bool{}
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") || e.IsDir() {
			continue
		}
		file := filepath.Join(f.dir, name)
		if !e.Type().IsRegular() {
			if st, err := os.Stat(file); err != nil || !st.Mode().IsRegular() {
				continue
			}
		}
		current[file] = true
		res, ok := f.parse(file)
		if !ok {
			continue
		}
		pod, warnings, err := res.pod, res.warnings, res.err
		for _, w := range warnings {
			f.report(file+"#warn", w)
		}
		if err != nil {
			u.Errors = append(u.Errors, f.fail(file, err))
			continue
		}
		candidates = append(candidates, parsed{file, pod})
	}

	owners := map[string]string{}
	for _, c := range candidates {
		key := c.pod.Namespace + "/" + c.pod.Name
		if prev, ok := f.owners[key]; ok && prev == c.file {
			owners[key] = c.file
		}
	}
	for _, c := range candidates {
		key := c.pod.Namespace + "/" + c.pod.Name
		if _, taken := owners[key]; !taken {
			owners[key] = c.file
		}
	}
	for _, c := range candidates {
		key := c.pod.Namespace + "/" + c.pod.Name
		if owner := owners[key]; owner != c.file {
			u.Errors = append(u.Errors, f.fail(c.file, fmt.Errorf("duplicate pod name %s: already defined in %s", key, owner)))
			continue
		}
		if _, had := f.reported[c.file]; had {
			f.log.Info("manifest is valid again", "file", c.file, "pod", key)
			delete(f.reported, c.file)
		}
		u.Pods = append(u.Pods, c.pod)
	}
	f.owners = owners
	for file := range f.parsed {
		if !current[file] {
			delete(f.parsed, file)
		}
	}
	for file := range f.reported {
		if base := strings.TrimSuffix(file, "#warn"); !current[base] && base != f.dir {
			delete(f.reported, file)
		}
	}
	return u
}

// parse reads and parses a manifest, reusing the last result while the
// file's size and modification time are unchanged. An empty file (one
// being written, usually) is skipped: ok is false. A file over
// manifest.MaxManifestSize is refused by its size, before anything is read.
func (f *File) parse(file string) (parseResult, bool) {
	st, err := os.Stat(file)
	if err != nil {
		return parseResult{err: err}, true
	}
	if st.Size() == 0 {
		return parseResult{}, false
	}
	if r, ok := f.parsed[file]; ok && r.size == st.Size() && r.mtime.Equal(st.ModTime()) {
		return r, true
	}
	r := parseResult{size: st.Size(), mtime: st.ModTime()}
	data, err := safefile.Read(file, manifest.MaxManifestSize)
	if err != nil {
		r.err = fmt.Errorf("manifest %w", err)
		f.parsed[file] = r
		return r, true
	}
	r.pod, r.warnings, r.err = manifest.ParseManifest(data, file, f.node)
	f.parsed[file] = r
	return r, true
}

func (f *File) fail(file string, err error) ManifestError {
	f.report(file, err.Error())
	return ManifestError{File: file, Err: err}
}

// report logs a problem once until it changes or goes away.
func (f *File) report(key, problem string) {
	if f.reported[key] == problem {
		return
	}
	f.reported[key] = problem
	if file, ok := strings.CutSuffix(key, "#warn"); ok {
		f.log.Warn("manifest has unknown fields (ignored)", "file", file, "detail", problem)
		return
	}
	f.log.Error("bad manifest; skipped, other pods are not affected", "file", key, "err", problem)
}

// sameUpdate compares two scans by pod UIDs and error texts.
func sameUpdate(a, b Update) bool {
	return reflect.DeepEqual(uids(a), uids(b)) && reflect.DeepEqual(errorTexts(a), errorTexts(b))
}

func uids(u Update) []types.UID {
	out := make([]types.UID, 0, len(u.Pods))
	for _, p := range u.Pods {
		out = append(out, p.UID)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func errorTexts(u Update) []string {
	out := make([]string, 0, len(u.Errors))
	for _, e := range u.Errors {
		out = append(out, e.Error())
	}
	sort.Strings(out)
	return out
}
