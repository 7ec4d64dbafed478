package experiment

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
)

// Background is background load, so the contended case is reproducible: busy
// CPU loops, disk writers that fsync each write, and page-cache churn (a
// file written, read back and removed, over and over). In a pod group it
// is the pods' workload; as hostLoad it runs on the host outside kubepods.
type Background struct {
	CPUWorkers  int `json:"cpuWorkers,omitempty"`
	DiskWriters int `json:"diskWriters,omitempty"`
	// DiskWriteSize is each write's size (default 256Mi).
	DiskWriteSize *resource.Quantity `json:"diskWriteSize,omitempty"`
	// PageCacheChurn is the size of the churned file; 0: none.
	PageCacheChurn *resource.Quantity `json:"pageCacheChurn,omitempty"`
	// Nice is the host load's niceness (-20..19); pods run at the
	// runtime's.
	Nice int `json:"nice,omitempty"`
}

const defaultDiskWriteSize = 256 << 20

// maxWorkersPerCore bounds each kind of worker: past that the scenario
// measures the scheduler, not the agent.
const maxWorkersPerCore = 64

// validate checks l at path; host says whether it runs on the host.
func (l *Background) validate(path string, host bool, nodeMemory int64, bad func(path, format string, args ...any)) {
	limit := maxWorkersPerCore * runtime.NumCPU()
	for _, w := range []struct {
		field string
		n     int
	}{{"cpuWorkers", l.CPUWorkers}, {"diskWriters", l.DiskWriters}} {
		if w.n < 0 || w.n > limit {
			bad(path+"."+w.field, "%d: want 0..%d (%d per core on %d cores)", w.n, limit, maxWorkersPerCore, runtime.NumCPU())
		}
	}
	if q := l.DiskWriteSize; q != nil && (q.Value() < 1<<20 || q.Value() > 64<<30) {
		bad(path+".diskWriteSize", "%s: want 1Mi..64Gi", q.String())
	}
	if q := l.PageCacheChurn; q != nil && (q.Value() < 0 || q.Value() > nodeMemory) {
		bad(path+".pageCacheChurn", "%s: want 0 to the node's %s", q.String(), quantity(nodeMemory))
	}
	if l.Nice < -20 || l.Nice > 19 {
		bad(path+".nice", "%d: want -20..19", l.Nice)
	}
	if !host && l.Nice != 0 {
		bad(path+".nice", "%d: only the host load has a niceness (pods run at the runtime's)", l.Nice)
	}
	if l.CPUWorkers == 0 && l.DiskWriters == 0 && l.churn() == 0 {
		bad(path, "no load: set cpuWorkers, diskWriters or pageCacheChurn")
	}
}

func (l *Background) churn() int64 {
	if l.PageCacheChurn == nil {
		return 0
	}
	return l.PageCacheChurn.Value()
}

func (l *Background) writeSize() int64 {
	if l.DiskWriteSize == nil {
		return defaultDiskWriteSize
	}
	return l.DiskWriteSize.Value()
}

// script is the load as one sh script writing its files under dir.
func (l *Background) script(dir string) string {
	var parts []string
	for i := 0; i < l.CPUWorkers; i++ {
		parts = append(parts, "while :; do :; done &")
	}
	for i := 0; i < l.DiskWriters; i++ {
		parts = append(parts, fmt.Sprintf("while :; do dd if=/dev/zero of=%s/write-%d bs=1M count=%d conv=fsync 2>/dev/null; done &",
			dir, i, max(l.writeSize()>>20, 1)))
	}
	if mb := l.churn() >> 20; mb > 0 {
		parts = append(parts, fmt.Sprintf("while :; do dd if=/dev/zero of=%s/churn bs=1M count=%d 2>/dev/null; cat %s/churn >/dev/null; rm -f %s/churn; done &",
			dir, mb, dir, dir))
	}
	return strings.Join(append(parts, "wait"), "\n")
}

// String is the load in a few words, for the report.
func (l *Background) String() string {
	var parts []string
	if l.CPUWorkers > 0 {
		parts = append(parts, fmt.Sprintf("%d busy loops", l.CPUWorkers))
	}
	if l.DiskWriters > 0 {
		parts = append(parts, fmt.Sprintf("%d fsync writers of %s", l.DiskWriters, quantity(l.writeSize())))
	}
	if c := l.churn(); c > 0 {
		parts = append(parts, "page-cache churn of "+quantity(c))
	}
	if l.Nice != 0 {
		parts = append(parts, "nice "+strconv.Itoa(l.Nice))
	}
	return strings.Join(parts, ", ")
}

// HostLoad is a running host load: one shell and its workers, in their
// own process group.
type HostLoad struct {
	cmd *exec.Cmd
	dir string
}

// StartHostLoad runs l on the host, its files under dir (also the
// integration tests' busy-node mode).
func StartHostLoad(l *Background, dir string) (*HostLoad, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	cmd := exec.Command("sh", "-c", l.script(dir))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("host load: %w", err)
	}
	h := &HostLoad{cmd: cmd, dir: dir}
	// The niceness is absolute (nice(1) would add to ours): set on the
	// whole group, workers forked later inherit it from the shell.
	if err := syscall.Setpriority(syscall.PRIO_PGRP, cmd.Process.Pid, l.Nice); err != nil {
		h.Stop()
		return nil, fmt.Errorf("host load: nice %d: %w", l.Nice, err)
	}
	return h, nil
}

// Stop kills the whole group, waits for it and removes its files.
func (h *HostLoad) Stop() error {
	syscall.Kill(-h.cmd.Process.Pid, syscall.SIGKILL)
	h.cmd.Wait()
	// Workers of the group may outlive the shell for a moment.
	deadline := time.Now().Add(5 * time.Second)
	for syscall.Kill(-h.cmd.Process.Pid, 0) == nil && time.Now().Before(deadline) {
		syscall.Kill(-h.cmd.Process.Pid, syscall.SIGKILL)
		time.Sleep(20 * time.Millisecond)
	}
	return os.RemoveAll(filepath.Clean(h.dir))
}

// runQueueWait is the time all of pid's threads have spent waiting on a
// run queue (the second field of /proc/PID/task/TID/schedstat). Threads
// that ended take their share with them: the difference of two readings
// is a lower bound.
func runQueueWait(pid int) (time.Duration, error) {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	if err != nil || len(tasks) == 0 {
		return 0, fmt.Errorf("no schedstat for pid %d: %v", pid, err)
	}
	var total int64
	for _, f := range tasks {
		data, err := os.ReadFile(f)
		if err != nil {
			continue // the thread ended
		}
		fields := strings.Fields(string(data))
		if len(fields) < 2 {
			continue
		}
		if ns, err := strconv.ParseInt(fields[1], 10, 64); err == nil {
			total += ns
		}
	}
	return time.Duration(total), nil
}
