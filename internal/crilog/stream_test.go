package crilog

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

var t0 = time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)

func criLine(sec int, tag, content string) string {
	return fmt.Sprintf("%s stdout %s %s\n", t0.Add(time.Duration(sec)*time.Second).Format(time.RFC3339Nano), tag, content)
}

func TestStreamOptions(t *testing.T) {
	path := filepath.Join(t.TempDir(), "0.log")
	body := criLine(0, "F", "one") + criLine(1, "P", "two-") + criLine(1, "F", "halves") + criLine(2, "F", "three") + criLine(3, "F", "four")
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		o    StreamOptions
		want string
	}{
		{"all", StreamOptions{Tail: -1}, "one\ntwo-halves\nthree\nfour\n"},
		{"tail counts file lines", StreamOptions{Tail: 2}, "three\nfour\n"},
		{"since", StreamOptions{Tail: -1, Since: t0.Add(1500 * time.Millisecond)}, "three\nfour\n"},
		{"since keeps a joined line whole", StreamOptions{Tail: -1, Since: t0.Add(time.Second)}, "two-halves\nthree\nfour\n"},
		{"limit", StreamOptions{Tail: -1, LimitBytes: 6}, "one\ntw"},
		{"timestamps once per line", StreamOptions{Tail: 3, Timestamps: true},
			t0.Add(time.Second).Format(time.RFC3339Nano) + " halves\n" + t0.Add(2*time.Second).Format(time.RFC3339Nano) + " three\n" + t0.Add(3*time.Second).Format(time.RFC3339Nano) + " four\n"},
	} {
		var out bytes.Buffer
		if err := Stream(context.Background(), path, c.o, &out); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if out.String() != c.want {
			t.Errorf("%s: got %q, want %q", c.name, out.String(), c.want)
		}
	}
	if err := Stream(context.Background(), filepath.Join(t.TempDir(), "none"), StreamOptions{}, &bytes.Buffer{}); !os.IsNotExist(err) {
		t.Errorf("a missing log: %v", err)
	}
}

// syncBuffer is a bytes.Buffer safe for the follower and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func waitFor(t *testing.T, out *syncBuffer, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for out.String() != want {
		if time.Now().After(deadline) {
			t.Fatalf("follow wrote %q, want %q", out.String(), want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A follow goes on across a rotation (the log renamed away, a new file
// opened at the path), waits for lines the runtime has not finished, and
// ends once the container stopped and the log is read. Time is synctest's:
// a wait of 50 ms is ten polls, whatever the machine's load.
func TestStreamFollowsAcrossRotation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		path := filepath.Join(dir, "0.log")
		if err := os.WriteFile(path, []byte(criLine(0, "F", "before")), 0o644); err != nil {
			t.Fatal(err)
		}
		var running atomic.Bool
		running.Store(true)
		out := &syncBuffer{}
		done := make(chan error, 1)
		go func() {
			done <- Stream(context.Background(), path, StreamOptions{Tail: -1, Follow: true, Running: running.Load, Poll: 5 * time.Millisecond}, out)
		}()
		waitFor(t, out, "before\n")

		f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		// Half a file line: nothing is written until the line is complete.
		line := criLine(1, "F", "appended")
		f.WriteString(line[:10])
		time.Sleep(50 * time.Millisecond)
		if got := out.String(); got != "before\n" {
			t.Fatalf("an incomplete line was written: %q", got)
		}
		f.WriteString(line[10:] + criLine(2, "F", "last of the old file"))
		f.Close()
		waitFor(t, out, "before\nappended\nlast of the old file\n")

		if err := os.Rename(path, path+".20261124-100000"); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(criLine(3, "F", "after rotation")), 0o644); err != nil {
			t.Fatal(err)
		}
		waitFor(t, out, "before\nappended\nlast of the old file\nafter rotation\n")

		f, err = os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		f.WriteString(criLine(4, "F", "final"))
		f.Close()
		running.Store(false)
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the follow did not end after the container stopped")
		}
		if want := "before\nappended\nlast of the old file\nafter rotation\nfinal\n"; out.String() != want {
			t.Errorf("got %q, want %q", out.String(), want)
		}
	})
}

// A follow ends when its context does (the client went away).
func TestStreamFollowEndsWithContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "0.log")
		os.WriteFile(path, []byte(criLine(0, "F", "x")), 0o644)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			done <- Stream(ctx, path, StreamOptions{Tail: -1, Follow: true, Poll: 5 * time.Millisecond}, &syncBuffer{})
		}()
		time.Sleep(20 * time.Millisecond)
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("follow outlived its context")
		}
	})
}

func TestStreamLimitEndsAFollow(t *testing.T) {
	path := filepath.Join(t.TempDir(), "0.log")
	os.WriteFile(path, []byte(strings.Repeat(criLine(0, "F", "0123456789"), 5)), 0o644)
	out := &syncBuffer{}
	if err := Stream(context.Background(), path, StreamOptions{Tail: -1, Follow: true, LimitBytes: 15}, out); err != nil {
		t.Fatal(err)
	}
	if out.String() != "0123456789\n0123" {
		t.Errorf("got %q", out.String())
	}
}
