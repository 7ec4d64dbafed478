package experiment

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
)

func TestHostLoadRunsAndLeavesNothingBehind(t *testing.T) {
	mi := resource.MustParse("1Mi")
	l := &Background{CPUWorkers: 1, DiskWriters: 1, DiskWriteSize: &mi, PageCacheChurn: &mi, Nice: 5}
	dir := filepath.Join(t.TempDir(), "load")
	h, err := StartHostLoad(l, dir)
	if err != nil {
		t.Fatal(err)
	}
	pgid := h.cmd.Process.Pid
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(dir, "write-0")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			h.Stop()
			t.Fatal("the disk writer wrote nothing in 10 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The kernel's getpriority answers 20 − nice; the niceness is absolute,
	// whatever the test's own.
	if prio, err := syscall.Getpriority(syscall.PRIO_PROCESS, pgid); err != nil || 20-prio != 5 {
		t.Errorf("host load niceness: getpriority %d (%v), want nice 5 (20 − 15)", prio, err)
	}
	if err := h.Stop(); err != nil {
		t.Fatal(err)
	}
	if syscall.Kill(-pgid, 0) == nil {
		t.Error("a worker of the host load outlived stop")
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the load's directory is still there: %v", err)
	}
}

func TestRunQueueWaitReadsEveryThread(t *testing.T) {
	a, err := runQueueWait(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	// Burn a little CPU from several goroutines; the wait cannot go back.
	done := make(chan bool)
	for i := 0; i < 4; i++ {
		go func() {
			for start := time.Now(); time.Since(start) < 50*time.Millisecond; {
			}
			done <- true
		}()
	}
	for i := 0; i < 4; i++ {
		<-done
	}
	b, err := runQueueWait(os.Getpid())
	if err != nil || b < a {
		t.Errorf("run-queue wait went from %s to %s (%v)", a, b, err)
	}
}
