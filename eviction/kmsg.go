package eviction

import (
	"bufio"
	"context"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// OOMKill is one kill by the kernel's OOM killer, as its log line tells it.
type OOMKill struct {
	PID        int
	Process    string
	Constraint string // CONSTRAINT_MEMCG (a cgroup hit its limit) or CONSTRAINT_NONE (the node ran out)
	OOMMemcg   string // the cgroup whose limit was hit
	TaskMemcg  string // the cgroup of the victim
	Seen       time.Time
}

// oomKillLine matches the kernel's one-line summary of a kill (4.19 and
// later): "oom-kill:constraint=...,oom_memcg=...,task_memcg=...,task=...,pid=...,uid=...".
var oomKillLine = regexp.MustCompile(`oom-kill:constraint=([A-Z_]+),.*?(?:oom_memcg=([^,]*),)?task_memcg=([^,]*),task=([^,]*),pid=(\d+)`)

// ParseOOMKill reads a kernel log message; ok is false for other messages.
func ParseOOMKill(msg string) (OOMKill, bool) {
	m := oomKillLine.FindStringSubmatch(msg)
	if m == nil {
		return OOMKill{}, false
	}
	pid, _ := strconv.Atoi(m[5])
	return OOMKill{Constraint: m[1], OOMMemcg: m[2], TaskMemcg: m[3], Process: m[4], PID: pid}, true
}

// WatchKernelOOM follows the kernel log (/dev/kmsg) from its end and calls
// onKill for every OOM kill until ctx ends. It returns an error when the
// log cannot be read (no CAP_SYSLOG, no /dev/kmsg).
func WatchKernelOOM(ctx context.Context, path string, onKill func(OOMKill)) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	// Only what happens from now on: the past was reported by whoever ran then.
	if _, err := f.Seek(0, io.SeekEnd); err != nil {
		f.Close()
		return err
	}
	go func() {
		<-ctx.Done()
		f.Close()
	}()
	go func() {
		// Each read returns one record: "prio,seq,usec,flags;message".
		r := bufio.NewReaderSize(f, 8192)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				if ctx.Err() != nil || !isOverwritten(err) {
					return
				}
				continue // the ring buffer wrapped under us (EPIPE): go on
			}
			_, msg, ok := strings.Cut(line, ";")
			if !ok {
				continue
			}
			if k, ok := ParseOOMKill(msg); ok {
				k.Seen = time.Now()
				onKill(k)
			}
		}
	}()
	return nil
}

func isOverwritten(err error) bool { return strings.Contains(err.Error(), "broken pipe") }

// PodUIDFromCgroup finds the pod UID in a cgroupfs path (".../pod<uid>/...")
// or a systemd one ("...-pod<uid with _ for ->.slice/..."); "" when none.
func PodUIDFromCgroup(path string) string {
	for _, part := range strings.Split(path, "/") {
		if strings.HasPrefix(part, "pod") && !strings.Contains(part, ".") {
			return strings.TrimPrefix(part, "pod")
		}
		if name, ok := strings.CutSuffix(part, ".slice"); ok {
			if i := strings.LastIndex(name, "-pod"); i >= 0 {
				return strings.ReplaceAll(name[i+4:], "_", "-")
			}
		}
	}
	return ""
}
