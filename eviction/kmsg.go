package eviction

import (
	"context"
	"strings"
	"time"

	"github.com/google/cadvisor/utils/oomparser"
)

// OOMKill is one kill by the kernel's OOM killer, as its log lines tell it.
type OOMKill struct {
	PID        int
	Process    string
	Constraint string // CONSTRAINT_MEMCG (a cgroup hit its limit) or CONSTRAINT_NONE (the node ran out)
	OOMMemcg   string // the cgroup whose limit was hit
	TaskMemcg  string // the cgroup of the victim ("/" when the kernel did not say)
	Seen       time.Time // the kernel's time of the kill
}

// WatchKernelOOM follows the kernel log (/dev/kmsg) through cadvisor's
// oomparser and calls onKill for every OOM kill from since on, until ctx
// ends. The parser reads the ring buffer from its start, so older kills
// (reported by whoever ran then) are skipped by their time. It returns an
// error when the log cannot be read (no CAP_SYSLOG, no /dev/kmsg).
func WatchKernelOOM(ctx context.Context, since time.Time, onKill func(OOMKill)) error {
	parser, err := oomparser.New()
	if err != nil {
		return err
	}
	stream := make(chan *oomparser.OomInstance, 16)
	// The parser cannot be stopped: it lives as long as the process.
	go parser.StreamOoms(stream)
	go forwardOOMs(ctx, stream, since, onKill)
	return nil
}

func forwardOOMs(ctx context.Context, stream <-chan *oomparser.OomInstance, since time.Time, onKill func(OOMKill)) {
	for {
		select {
		case <-ctx.Done():
			return
		case in := <-stream:
			if in.TimeOfDeath.Before(since) {
				continue
			}
			k := OOMKill{PID: in.Pid, Process: in.ProcessName, Constraint: in.Constraint, TaskMemcg: in.VictimContainerName, Seen: in.TimeOfDeath}
			if in.ContainerName != "/" || in.Constraint == "CONSTRAINT_MEMCG" {
				k.OOMMemcg = in.ContainerName
			}
			onKill(k)
		}
	}
}

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
