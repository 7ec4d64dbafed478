package eviction

import (
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// PressureTrigger is a PSI trigger: the kernel wakes it when tasks stalled
// on memory for more than a threshold within a window. It is how the
// agent hears of pressure that no usage line catches: the node's own
// memory.available on cgroup v2, where the root has neither thresholds
// nor memory.high, and growth outside the pods anywhere.
type PressureTrigger struct {
	Path    string
	Trigger string // as written, e.g. "some 100000 1000000"
	f       *os.File
	stop    [2]int // a pipe that ends the poll
	done    chan struct{}
}

// Stall thresholds in microseconds. Without CAP_SYS_RESOURCE the kernel
// takes only windows that are multiples of 2 s, so the same 10% share of
// stalled time is asked for over 2 s there.
var pressureTriggers = []string{"some 100000 1000000", "some 200000 2000000"}

// WatchPressure arms a trigger on a pressure file (/proc/pressure/memory
// or a cgroup's memory.pressure) and calls onFire from its goroutine each
// time it fires.
func WatchPressure(path string, onFire func(at time.Time)) (*PressureTrigger, error) {
	var errs []error
	for _, trigger := range pressureTriggers {
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			return nil, fmt.Errorf("PSI trigger on %s: %w", path, err)
		}
		// The kernel reads the trigger as a C string: the NUL keeps it
		// from cutting off the last digit.
		if _, err := unix.Write(int(f.Fd()), append([]byte(trigger), 0)); err != nil {
			f.Close()
			errs = append(errs, fmt.Errorf("%q: %w", trigger, err))
			continue
		}
		p := &PressureTrigger{Path: path, Trigger: trigger, f: f, done: make(chan struct{})}
		if err := unix.Pipe2(p.stop[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
			f.Close()
			return nil, fmt.Errorf("PSI trigger on %s: %w", path, err)
		}
		go p.poll(onFire)
		return p, nil
	}
	return nil, fmt.Errorf("PSI trigger on %s refused: %w", path, errors.Join(errs...))
}

func (p *PressureTrigger) poll(onFire func(time.Time)) {
	defer close(p.done)
	fds := []unix.PollFd{{Fd: int32(p.f.Fd()), Events: unix.POLLPRI}, {Fd: int32(p.stop[0]), Events: unix.POLLIN}}
	for {
		fds[0].Revents, fds[1].Revents = 0, 0
		if _, err := unix.Poll(fds, -1); err != nil {
			if err == unix.EINTR {
				continue
			}
			return
		}
		if fds[1].Revents != 0 {
			return
		}
		if fds[0].Revents&unix.POLLERR != 0 {
			return // the cgroup went away
		}
		if fds[0].Revents&unix.POLLPRI != 0 {
			onFire(time.Now())
		}
	}
}

// Close removes the trigger and waits for its goroutine.
func (p *PressureTrigger) Close() {
	unix.Write(p.stop[1], []byte{0})
	<-p.done
	p.f.Close()
	unix.Close(p.stop[0])
	unix.Close(p.stop[1])
}
