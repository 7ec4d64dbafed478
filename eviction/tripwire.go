package eviction

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"

	"nodeagent/cgroups"
)

// Tripwires are the cgroup v2 counterpart of memcg thresholds, which v2
// lacks: memory.high of a cgroup is set at the usage line, and the kernel
// bumps the "high" counter in memory.events (a modification inotify
// reports) the moment usage crosses it. Above the wire the kernel also
// reclaims and throttles, which buys time while the eviction runs. A wire
// is taken down (memory.high back to "max") when it is disarmed or the
// agent stops, so pods are never left throttled by a wire nobody watches.
type Tripwires struct {
	onCross func(at time.Time)
	setHigh func(dir string, bytes int64) error

	mu      sync.Mutex
	watcher *fsnotify.Watcher
	wires   map[string]*wire // by directory
	done    chan struct{}
}

type wire struct {
	dir    string
	line   int64 // the usage line asked for
	set    int64 // what memory.high holds: the line plus wireMargin
	events int64 // the last "high" count seen
}

// wireMargin is how far above the usage line memory.high goes. The kernel
// holds a cgroup's usage at memory.high (it reclaims file pages, then
// throttles), so a wire right on the line holds the pods on it, the signal
// a hair either side, and the wake often reads "not yet" (seen in the v2
// lane: the poll, not the wire, then took the decision). A margin wider
// than the kernel's per-CPU charge and statistics batches (64 pages a CPU)
// puts the first reading after the crossing past the line.
func wireMargin() int64 { return max(4<<20, int64(runtime.NumCPU())*2*(256<<10)) }

// NewTripwires starts the inotify watcher; onCross is called from its
// goroutine. setHigh sets memory.high of a cgroup directory (-1: "max");
// nil writes the file (cgroups.MemoryHighSetter says how for a manager).
func NewTripwires(onCross func(at time.Time), setHigh func(dir string, bytes int64) error) (*Tripwires, error) {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("inotify for memory.events: %w", err)
	}
	if setHigh == nil {
		setHigh = cgroups.WriteMemoryHigh
	}
	t := &Tripwires{onCross: onCross, setHigh: setHigh, watcher: w, wires: map[string]*wire{}, done: make(chan struct{})}
	go t.watch()
	return t, nil
}

// Arm sets the wire of the cgroup dir for a usage line (in bytes): at
// line + wireMargin. It is moved when the line moved by more than
// rearmSlack, or memory.high was changed behind our back.
func (t *Tripwires) Arm(dir string, line int64) error {
	if line <= 0 {
		return fmt.Errorf("tripwire for usage line %d on %s: must be positive", line, dir)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	w, ok := t.wires[dir]
	current, err := readHigh(dir)
	if err != nil {
		return err
	}
	if ok && abs(w.line-line) <= rearmSlack && current == w.set {
		return nil
	}
	// In whole pages, as the kernel keeps it: what reads back is then what
	// was set, and an unchanged wire is left alone.
	page := int64(os.Getpagesize())
	set := (line + wireMargin()) / page * page
	if err := t.setHigh(dir, set); err != nil {
		return fmt.Errorf("set tripwire on %s: %w", dir, err)
	}
	if !ok {
		if err := t.watcher.Add(filepath.Join(dir, "memory.events")); err != nil {
			return fmt.Errorf("watch %s/memory.events: %w", dir, err)
		}
		w = &wire{dir: dir}
		t.wires[dir] = w
		w.events, _ = readEvent(dir, "high")
	}
	w.line, w.set = line, set
	return nil
}

// Close takes every wire down and stops watching.
func (t *Tripwires) Close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for dir := range t.wires {
		t.setHigh(dir, -1)
		delete(t.wires, dir)
	}
	t.watcher.Close()
}

func (t *Tripwires) watch() {
	for {
		select {
		case ev, ok := <-t.watcher.Events:
			if !ok {
				return
			}
			at := time.Now()
			dir := filepath.Dir(ev.Name)
			t.mu.Lock()
			w, ok := t.wires[dir]
			crossed := false
			if ok {
				if n, err := readEvent(dir, "high"); err == nil && n != w.events {
					w.events, crossed = n, true
				}
			}
			t.mu.Unlock()
			if crossed {
				t.onCross(at)
			}
		case _, ok := <-t.watcher.Errors:
			if !ok {
				return
			}
		}
	}
}

// readHigh reads memory.high; "max" is -1.
func readHigh(dir string) (int64, error) {
	b, err := os.ReadFile(filepath.Join(dir, "memory.high"))
	if err != nil {
		return 0, err
	}
	v := strings.TrimSpace(string(b))
	if v == "max" {
		return -1, nil
	}
	return strconv.ParseInt(v, 10, 64)
}

// readEvent reads one counter of memory.events.
func readEvent(dir, name string) (int64, error) {
	kv, err := cgroups.ReadFlatKeyed(filepath.Join(dir, "memory.events"))
	if err != nil {
		return 0, err
	}
	v, ok := kv[name]
	if !ok {
		return 0, errors.New("no " + name + " in " + dir + "/memory.events")
	}
	return int64(v), nil
}
