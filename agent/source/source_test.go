package source

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"
	"golang.org/x/sys/unix"
	"k8s.io/utils/ptr"
)

const goodPod = `apiVersion: v1
kind: Pod
metadata:
  name: web
  labels: {app: web}
spec:
  containers:
  - name: main
    image: 127.0.0.1:5050/nodeagent/test:latest
    command: ["sleep", "3600"]
    resources:
      limits: {cpu: 100m, memory: 64Mi}
`

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func TestScanIsolatesBadManifests(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"a-good.yaml":   goodPod,
		"b-broken.yaml": "apiVersion: v1\nkind: Deployment\n",
		"c-dup.yaml":    goodPod,
		".hidden.yaml":  "garbage",
		"d-other.json":  `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"other"},"spec":{"containers":[{"name":"c","image":"busybox:1"}]}}`,
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	u := NewFile(dir, "n", time.Hour, quiet()).Scan()
	if len(u.Pods) != 2 || u.Pods[0].Name != "web-n" || u.Pods[1].Name != "other-n" {
		t.Fatalf("pods = %v", u.Pods)
	}
	if len(u.Errors) != 2 {
		t.Fatalf("errors = %v", u.Errors)
	}
	byFile := map[string]string{}
	for _, e := range u.Errors {
		byFile[filepath.Base(e.File)] = e.Err.Error()
	}
	if !strings.Contains(byFile["b-broken.yaml"], `kind "Deployment"`) {
		t.Errorf("broken: %q", byFile["b-broken.yaml"])
	}
	if !strings.Contains(byFile["c-dup.yaml"], "duplicate pod name default/web-n") || !strings.Contains(byFile["c-dup.yaml"], "a-good.yaml") {
		t.Errorf("dup: %q", byFile["c-dup.yaml"])
	}
}

// A duplicate added later, even one sorting first, never displaces the
// pod that already runs.
func TestDuplicateNeverDisplacesExistingPod(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "m-web.yaml"), []byte(goodPod), 0o644); err != nil {
		t.Fatal(err)
	}
	src := NewFile(dir, "n", time.Hour, quiet())
	first := src.Scan()
	if len(first.Pods) != 1 {
		t.Fatalf("first scan: %v", first.Errors)
	}
	if err := os.WriteFile(filepath.Join(dir, "a-copy.yaml"), []byte(goodPod), 0o644); err != nil {
		t.Fatal(err)
	}
	second := src.Scan()
	if len(second.Pods) != 1 || second.Pods[0].UID != first.Pods[0].UID {
		t.Fatalf("the running pod was displaced: %v", second.Pods)
	}
	if len(second.Errors) != 1 || filepath.Base(second.Errors[0].File) != "a-copy.yaml" {
		t.Fatalf("errors = %v", second.Errors)
	}
}

func TestRunPicksUpNewFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "manifests") // created by Run
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := make(chan Update, 4)
	go NewFile(dir, "n", time.Hour, quiet()).Run(ctx, out)

	if u := recv(t, out); len(u.Pods) != 0 {
		t.Fatalf("initial update = %v", u.Pods)
	}
	if err := os.WriteFile(filepath.Join(dir, "web.yaml"), []byte(goodPod), 0o644); err != nil {
		t.Fatal(err)
	}
	if u := recv(t, out); len(u.Pods) != 1 {
		t.Fatalf("after add: %v", u.Pods)
	}
	if err := os.Remove(filepath.Join(dir, "web.yaml")); err != nil {
		t.Fatal(err)
	}
	if u := recv(t, out); len(u.Pods) != 0 {
		t.Fatalf("after remove: %v", u.Pods)
	}
}

// recv waits for the next update; the hour-long rescan period means only
// inotify can deliver it.
func recv(t *testing.T, out <-chan Update) Update {
	t.Helper()
	select {
	case u := <-out:
		return u
	case <-time.After(10 * time.Second):
		t.Fatal("no update: the file change was not noticed")
	}
	return Update{}
}

// The audit dropped a 200 MiB file in the manifest directory: the agent
// read it whole (32 MiB to 235 MiB RSS) at every scan. It is refused by
// its size, and a FIFO never blocks the scan.
func TestScanRefusesHugeManifestsWithoutReadingThem(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "web.yaml"), []byte(goodPod), 0o644)
	big, _ := os.Create(filepath.Join(dir, "big.yaml"))
	big.Truncate(200 << 20)
	big.Close()
	if err := unix.Mkfifo(filepath.Join(dir, "fifo.yaml"), 0o644); err != nil {
		t.Fatal(err)
	}
	f := NewFile(dir, "n", time.Minute, quiet())
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	done := make(chan Update, 1)
	go func() { done <- f.Scan() }()
	var u Update
	select {
	case u = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Scan blocked (on the FIFO?)")
	}
	runtime.ReadMemStats(&after)
	if len(u.Pods) != 1 || u.Pods[0].Name != "web-n" {
		t.Errorf("the good manifest must still run: %v", u.Pods)
	}
	want := filepath.Join(dir, "big.yaml") + ": manifest is 209715200 bytes, more than the 10485760 allowed"
	if len(u.Errors) != 1 || u.Errors[0].Error() != want {
		t.Errorf("errors %v, want [%s]", u.Errors, want)
	}
	if grown := after.TotalAlloc - before.TotalAlloc; grown > 4<<20 {
		t.Errorf("the scan allocated %d MiB: the 200 MiB file must not be read", grown>>20)
	}
}

// fsnotify reports a full kernel queue (IN_Q_OVERFLOW) on its error
// channel and waits until someone reads it; unread, no event came through
// again and changes waited for the periodic rescan. The error is read, and
// an overflow rescans at once: the events it lost are not needed.
func TestAWatcherOverflowRescansAtOnce(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := make(chan Update, 4)
	events, errs := make(chan fsnotify.Event), make(chan error)
	go NewFile(dir, "n", time.Hour, quiet()).watch(ctx, out, events, errs)
	recv(t, out)
	// A change whose event the full queue lost.
	if err := os.WriteFile(filepath.Join(dir, "web.yaml"), []byte(goodPod), 0o644); err != nil {
		t.Fatal(err)
	}
	select {
	case errs <- fsnotify.ErrEventOverflow:
	case <-time.After(5 * time.Second):
		t.Fatal("the watcher's error was not read")
	}
	if u := recv(t, out); len(u.Pods) != 1 {
		t.Fatalf("after the overflow: %v", u.Pods)
	}
}

// Remove unlinks only an entry of the directory itself: a link there is
// removed, not its target; paths elsewhere, a directory, or a name that
// climbs out are refused and left alone.
func TestRemoveStaysInsideTheDirectory(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	victim := filepath.Join(outside, "etcd.yaml")
	for _, f := range []string{victim, filepath.Join(dir, "web.yaml")} {
		if err := os.WriteFile(f, []byte(goodPod), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(victim, filepath.Join(dir, "link.yaml")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "sub.yaml"), 0o755); err != nil {
		t.Fatal(err)
	}
	src := NewFile(dir, "n", time.Hour, quiet())
	for _, bad := range []string{victim, filepath.Join(dir, "..", filepath.Base(outside), "etcd.yaml"), "relative.yaml", filepath.Join(dir, "sub.yaml"), dir} {
		if err := src.Remove(bad); !errors.Is(err, ErrNotManifest) {
			t.Errorf("Remove(%s) = %v, want ErrNotManifest", bad, err)
		}
	}
	for _, ok := range []string{filepath.Join(dir, "web.yaml"), filepath.Join(dir, "link.yaml"), filepath.Join(dir, "gone.yaml")} {
		if err := src.Remove(ok); err != nil {
			t.Errorf("Remove(%s) = %v", ok, err)
		}
		if _, err := os.Lstat(ok); !os.IsNotExist(err) {
			t.Errorf("%s still there: %v", ok, err)
		}
	}
	if _, err := os.Stat(victim); err != nil {
		t.Errorf("the link's target: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "sub.yaml")); err != nil {
		t.Errorf("the directory: %v", err)
	}
}

// nodectl delete goes through the source: the manifest goes, and the
// update without the pod carries the grace override, sent before Delete
// returns; no update lists the pod again (scans and the deletion take
// turns). A pod no manifest defines is ErrNoManifest, the file untouched.
func TestDeleteRemovesTheManifestAndSendsTheGrace(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "web.yaml")
	if err := os.WriteFile(file, []byte(goodPod), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := make(chan Update)
	src := NewFile(dir, "n", 10*time.Millisecond, quiet()) // rescans all the time
	go src.Run(ctx, out)
	first := recv(t, out)
	if len(first.Pods) != 1 {
		t.Fatalf("first update %v", first.Pods)
	}
	pod := first.Pods[0]

	if err := src.Delete(ctx, pod.Namespace, "other", nil); !errors.Is(err, ErrNoManifest) {
		t.Errorf("Delete of a pod no manifest defines: %v, want ErrNoManifest", err)
	}
	deleted := make(chan error, 1)
	go func() { deleted <- src.Delete(ctx, pod.Namespace, pod.Name, ptr.To[int64](3)) }()
	u := recv(t, out)
	if len(u.Pods) != 0 || u.Grace[pod.UID] != 3 || len(u.Grace) != 1 {
		t.Fatalf("update after Delete: pods %v grace %v, want no pod and grace 3 for %s", u.Pods, u.Grace, pod.UID)
	}
	if err := <-deleted; err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(file); !os.IsNotExist(err) {
		t.Errorf("manifest still there: %v", err)
	}
	// Scans go on every 10 ms: none brings the pod back.
	for end := time.Now().Add(200 * time.Millisecond); time.Now().Before(end); {
		select {
		case u := <-out:
			if len(u.Pods) != 0 {
				t.Fatalf("the deleted pod is listed again: %v", u.Pods)
			}
		case <-time.After(20 * time.Millisecond):
		}
	}
	cancel()
	if err := src.Delete(context.Background(), pod.Namespace, pod.Name, nil); err == nil {
		t.Error("Delete on a stopped source succeeded")
	}
}
