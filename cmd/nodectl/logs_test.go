package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestLogOptionsAreKubectls(t *testing.T) {
	api, err := logOptions{tail: 5, since: 90*time.Second + time.Millisecond, limitBytes: 100, timestamps: true, follow: true}.podLogOptions()
	if err != nil {
		t.Fatal(err)
	}
	if *api.TailLines != 5 || *api.SinceSeconds != 91 || *api.LimitBytes != 100 || !api.Timestamps || !api.Follow || api.SinceTime != nil {
		t.Errorf("options: %+v", api)
	}
	// -f with --previous has nothing to follow: the run ended.
	if api, err := (logOptions{follow: true, previous: true}).podLogOptions(); err != nil || api.Follow || !api.Previous {
		t.Errorf("-f --previous: %+v %v", api, err)
	}
	api, err = logOptions{tail: -1, sinceTime: "2026-11-24T10:00:00Z"}.podLogOptions()
	if err != nil || api.TailLines != nil || !api.SinceTime.Equal(&metav1.Time{Time: time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)}) {
		t.Errorf("options: %+v, %v", api, err)
	}
	for _, bad := range []struct {
		o    logOptions
		want string
	}{
		{logOptions{since: time.Second, sinceTime: "2026-11-24T10:00:00Z"}, "--since and --since-time cannot be given together"},
		{logOptions{since: -time.Second}, "--since -1s: must be a positive duration"},
		{logOptions{sinceTime: "yesterday"}, `--since-time "yesterday": want an RFC 3339 time`},
		{logOptions{limitBytes: -1}, "--limit-bytes -1: must be greater than 0"},
	} {
		if _, err := bad.o.podLogOptions(); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%+v: got %v, want %q", bad.o, err, bad.want)
		}
	}
}

func TestDefaultContainerIsKubectls(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"},
		Spec: corev1.PodSpec{InitContainers: []corev1.Container{{Name: "init"}}, Containers: []corev1.Container{{Name: "app"}, {Name: "side"}}},
		Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: "app"}, {Name: "side"}},
			InitContainerStatuses: []corev1.ContainerStatus{{Name: "init"}}}}
	var notice bytes.Buffer
	cs, err := pickContainer(pod, "", &notice)
	if err != nil || cs.Name != "app" || notice.String() != "Defaulted container \"app\" out of: app, side, init (init)\n" {
		t.Errorf("default: %q %v, notice %q", cs.Name, err, notice.String())
	}
	pod.Annotations = map[string]string{defaultContainerAnnotation: "side"}
	notice.Reset()
	if cs, err := pickContainer(pod, "", &notice); err != nil || cs.Name != "side" || notice.Len() > 0 {
		t.Errorf("annotated default: %q %v, notice %q", cs.Name, err, notice.String())
	}
	if cs, err := pickContainer(pod, "init", nil); err != nil || cs.Name != "init" {
		t.Errorf("-c init: %q %v", cs.Name, err)
	}
	if _, err := pickContainer(pod, "nope", nil); err == nil || err.Error() != "container nope is not valid for pod p" {
		t.Errorf("-c nope: %v", err)
	}
}

// Several followed containers share the output line by line, each line
// whole and prefixed.
func TestLineWriterKeepsLinesWhole(t *testing.T) {
	var out bytes.Buffer
	var mu sync.Mutex
	a := &lineWriter{mu: &mu, out: &out, prefix: "[a] "}
	b := &lineWriter{mu: &mu, out: &out, prefix: "[b] "}
	a.Write([]byte("one "))
	b.Write([]byte("two\nthr"))
	a.Write([]byte("half\n"))
	b.Write([]byte("ee"))
	b.flush()
	if got := out.String(); got != "[b] two\n[a] one half\n[b] three\n" {
		t.Errorf("output %q", got)
	}
	// A line longer than maxPendingLine is not held whole: it goes out in
	// pieces of that size, each a line of its own.
	out.Reset()
	long := bytes.Repeat([]byte("x"), 3*maxPendingLine+10)
	for i := 0; i < len(long); i += 1000 {
		a.Write(long[i:min(i+1000, len(long))])
		if len(a.buf) > maxPendingLine {
			t.Fatalf("%d bytes held", len(a.buf))
		}
	}
	a.flush()
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 4 || len(lines[0]) != len("[a] ")+maxPendingLine || len(lines[3]) != len("[a] ")+10 {
		t.Errorf("a %d-byte line came out as %d lines", len(long), len(lines))
	}
}

// The log file is named from the read-only API's pod: a link placed where
// the log should be is not followed.
func TestLogFileRefusesALink(t *testing.T) {
	dir := t.TempDir()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: "u1"}}
	cs := corev1.ContainerStatus{Name: "app", ContainerID: "containerd://abc"}
	logDir := filepath.Join(dir, "default_p_u1", "app")
	os.MkdirAll(logDir, 0o755)
	os.WriteFile(filepath.Join(dir, "secret"), []byte("x"), 0o600)
	os.Symlink(filepath.Join(dir, "secret"), filepath.Join(logDir, "0.log"))
	if _, err := logFile(pod, cs, dir, false); err == nil || !strings.Contains(err.Error(), "is not a regular file") {
		t.Errorf("a symlinked log: %v", err)
	}
	os.Remove(filepath.Join(logDir, "0.log"))
	os.WriteFile(filepath.Join(logDir, "0.log"), nil, 0o600)
	if target, err := logFile(pod, cs, dir, false); err != nil || target.id != "abc" || target.file != filepath.Join(logDir, "0.log") {
		t.Errorf("the log: %+v %v", target, err)
	}
	if _, err := logFile(pod, cs, dir, true); err == nil || !strings.Contains(err.Error(), "previous terminated container") {
		t.Errorf("--previous without a previous run: %v", err)
	}
}
