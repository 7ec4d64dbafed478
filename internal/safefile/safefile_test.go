package safefile

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestReadChecksTheSizeBeforeReading(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, "big.yaml")
	f, _ := os.Create(big)
	f.Truncate(200 << 20) // sparse: costs no disk, would cost 200 MiB to read
	f.Close()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := Read(big, 10<<20)
	runtime.ReadMemStats(&after)
	var tl *TooLargeError
	if !errors.As(err, &tl) || tl.Size != 200<<20 || err.Error() != "is 209715200 bytes, more than the 10485760 allowed" {
		t.Fatalf("got %v", err)
	}
	if grown := after.TotalAlloc - before.TotalAlloc; grown > 1<<20 {
		t.Errorf("refusing a 200 MiB file allocated %d KiB: it must not be read", grown>>10)
	}

	small := filepath.Join(dir, "small")
	os.WriteFile(small, []byte("hello"), 0o644)
	if b, err := Read(small, 5); err != nil || string(b) != "hello" {
		t.Errorf("at the limit: %q %v", b, err)
	}
	if _, err := Read(small, 4); !errors.As(err, &tl) {
		t.Errorf("over the limit: %v", err)
	}
}

func TestReadNeverBlocksOnAFIFO(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "pod.yaml")
	if err := unix.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := Read(fifo, 1<<20); done <- err }()
	select {
	case err := <-done:
		if err == nil || err.Error() != "not a regular file (p---------)" {
			t.Errorf("got %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Read blocked on a FIFO")
	}
}

func TestWriteReplacesAndLeavesNoTemporaryFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "10-nodeagent.conflist")
	for _, content := range []string{"first", "second"} {
		if err := Write(p, []byte(content), 0o640); err != nil {
			t.Fatal(err)
		}
		b, _ := os.ReadFile(p)
		if string(b) != content {
			t.Errorf("content %q, want %q", b, content)
		}
	}
	st, _ := os.Stat(p)
	if st.Mode().Perm() != 0o640 {
		t.Errorf("mode %v", st.Mode())
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("left behind: %v", entries)
	}
	// A failed write leaves the old file and no temporary one.
	if err := Write(filepath.Join(dir, "missing", "x"), []byte("x"), 0o644); err == nil {
		t.Error("a write into a missing directory must fail")
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("left behind after a failure: %v", entries)
	}
}
