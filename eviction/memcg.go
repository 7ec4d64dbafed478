package eviction

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"nodeagent/cgroups"
)

// MemcgThresholds arms cgroup v1 memory usage thresholds: for each line an
// eventfd registered through cgroup.event_control on memory.usage_in_bytes
// wakes a goroutine the moment usage crosses it, which calls the callback
// with the time it woke. The kubelet does the same behind
// kernelMemcgNotification (off by default) and re-arms every 10 s; here a
// line is re-armed whenever it moves by more than rearmSlack.
type MemcgThresholds struct {
	onCross func(at time.Time, by string)

	mu    sync.Mutex
	armed map[string]*memcgLine // by caller's key
}

type memcgLine struct {
	by    string // WokenByMemcgThreshold or WokenByMemcgOOM
	dir   string
	usage int64
	event *os.File
	ctl   *os.File
}

// rearmSlack is how far a line may drift (as inactive_file changes) before
// it is re-armed.
const rearmSlack = 1 << 20

// NewMemcgThresholds returns an empty set; onCross is called from the
// waiting goroutines.
func NewMemcgThresholds(onCross func(at time.Time, by string)) *MemcgThresholds {
	return &MemcgThresholds{onCross: onCross, armed: map[string]*memcgLine{}}
}

// Arm sets the line for key: notify when memory.usage_in_bytes of the
// memory cgroup dir crosses usage bytes. observed is the usage the line was
// computed from: the kernel only reports crossings after the registration,
// so a climb past the line in between (registering waits for an RCU grace
// period) is reported here, as a crossing.
func (m *MemcgThresholds) Arm(key, dir string, usage, observed int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if old, ok := m.armed[key]; ok {
		if old.dir == dir && abs(old.usage-usage) <= rearmSlack {
			return nil
		}
		old.close()
		delete(m.armed, key)
	}
	if usage <= 0 {
		return fmt.Errorf("memcg threshold %d on %s: must be positive", usage, dir)
	}
	if err := m.armLocked(key, dir, "memory.usage_in_bytes", usage); err != nil {
		return err
	}
	if observed < usage {
		if now, err := cgroups.ReadUint(filepath.Join(dir, "memory.usage_in_bytes")); err == nil && int64(now) >= usage {
			go m.onCross(time.Now(), WokenByMemcgThreshold)
		}
	}
	return nil
}

// ArmOOM asks for a notification when the memory cgroup dir (or a cgroup
// below it) hits its limit and the kernel's OOM killer is invoked in it:
// for kubepods, that is the pods together outgrowing their allocatable.
func (m *MemcgThresholds) ArmOOM(key, dir string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if old, ok := m.armed[key]; ok {
		if old.dir == dir {
			return nil
		}
		old.close()
		delete(m.armed, key)
	}
	return m.armLocked(key, dir, "memory.oom_control", 0)
}

func (m *MemcgThresholds) armLocked(key, dir, file string, usage int64) error {
	line, err := armEvent(dir, file, usage)
	if err != nil {
		return err
	}
	line.by = WokenByMemcgThreshold
	if usage == 0 {
		line.by = WokenByMemcgOOM
	}
	m.armed[key] = line
	go m.wait(line)
	return nil
}

// Close disarms every line.
func (m *MemcgThresholds) Close() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, l := range m.armed {
		l.close()
		delete(m.armed, k)
	}
}

// armEvent registers an eventfd for file of the memory cgroup dir through
// cgroup.event_control; usage is the threshold for memory.usage_in_bytes.
func armEvent(dir, file string, usage int64) (*memcgLine, error) {
	ctl, err := os.Open(filepath.Join(dir, file))
	if err != nil {
		return nil, err
	}
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		ctl.Close()
		return nil, fmt.Errorf("eventfd: %w", err)
	}
	// A non-blocking fd goes to Go's poller: Read parks the goroutine and
	// Close wakes it.
	event := os.NewFile(uintptr(efd), "memcg-threshold")
	spec := fmt.Sprintf("%d %d", efd, ctl.Fd())
	if usage > 0 {
		spec += fmt.Sprintf(" %d", usage)
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup.event_control"), []byte(spec), 0o200); err != nil {
		event.Close()
		ctl.Close()
		return nil, fmt.Errorf("arm memcg notification on %s/%s: %w", dir, file, err)
	}
	return &memcgLine{dir: dir, usage: usage, event: event, ctl: ctl}, nil
}

func (l *memcgLine) close() {
	l.event.Close() // closing the eventfd unregisters the threshold
	l.ctl.Close()
}

// wait reads the eventfd until the line is closed; every read is a
// crossing (up or down).
func (m *MemcgThresholds) wait(l *memcgLine) {
	var buf [8]byte
	for {
		if _, err := l.event.Read(buf[:]); err != nil {
			if !errors.Is(err, os.ErrClosed) {
				m.mu.Lock()
				if m.armed != nil {
					for k, x := range m.armed {
						if x == l {
							delete(m.armed, k) // re-armed at the next observation
						}
					}
				}
				m.mu.Unlock()
			}
			return
		}
		m.onCross(time.Now(), l.by)
	}
}

func abs(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

// usageLine converts an available-memory threshold into the usage at which
// it is met: available = capacity − (usage − inactive_file) < line exactly
// when usage > capacity − line + inactive_file.
func usageLine(capacity, line, inactiveFile int64) int64 {
	return capacity - line + inactiveFile
}
