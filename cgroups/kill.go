package cgroups

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// killPasses bounds how often the process lists are read again for
// processes forked while the first ones were being signalled.
const killPasses = 16

// Kill sends SIGKILL to every process in the cgroup at dir and its
// descendants, without waiting for them to exit, and returns how many
// processes were signalled (0 when the kernel killed them itself). Where
// the kernel has cgroup.kill (v2, Linux 5.14 on) one write does it, forks
// included; elsewhere each pid in the cgroup.procs files is signalled, and
// the lists are read again until they hold no process not signalled yet.
// With freezer, the same cgroup's directory in the v1 freezer hierarchy
// (""; none), every listed process is signalled at once, then the cgroup
// is frozen, what forked meanwhile signalled, and the cgroup thawed, as
// runc kills a container: nothing escapes by forking, and a process stuck
// in reclaim, which keeps a cgroup from freezing, does not hold back the
// first signals. A missing cgroup is success: there is nothing left to
// kill.
func Kill(dir, freezer string) (int, error) {
	var f func() (func() error, error)
	if freezer != "" {
		f = func() (func() error, error) { return freeze(freezer) }
	}
	return kill(dir, f)
}

// kill is Kill with the freezing done by freeze (nil: none).
func kill(dir string, freeze func() (thaw func() error, err error)) (int, error) {
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	switch err := writeExisting(filepath.Join(dir, "cgroup.kill"), "1"); {
	case err == nil:
		return 0, nil
	case !errors.Is(err, os.ErrNotExist):
		return 0, fmt.Errorf("kill cgroup %s: %w", dir, err)
	}
	signalled := map[int]bool{}
	if freeze == nil {
		return signalAll(dir, signalled, killPasses)
	}
	if _, err := signalAll(dir, signalled, 1); err != nil {
		return len(signalled), err
	}
	thaw, err := freeze()
	if err != nil {
		// Unfrozen (it would not freeze), the passes still catch what
		// forks meanwhile; a cgroup left frozen is the caller's to know.
		n, serr := signalAll(dir, signalled, killPasses)
		if errors.Is(err, errThaw) {
			serr = errors.Join(serr, err)
		}
		return n, serr
	}
	n, err := signalAll(dir, signalled, killPasses)
	if terr := thaw(); terr != nil {
		// Signalled and frozen, they would never die.
		err = errors.Join(err, fmt.Errorf("kill cgroup %s: thaw: %w", dir, terr))
	}
	return n, err
}

// signalAll SIGKILLs the processes listed under dir, reading the lists
// again up to passes times until no new one appears; never init or the
// agent itself. signalled holds the pids signalled already.
func signalAll(dir string, signalled map[int]bool, passes int) (int, error) {
	self := os.Getpid()
	for pass := 0; pass < passes; pass++ {
		pids, err := readProcs(dir)
		if err != nil {
			return len(signalled), fmt.Errorf("kill cgroup %s: %w", dir, err)
		}
		fresh := 0
		for _, pid := range pids {
			// The kernel lists the cgroup's members; the agent and init are
			// never among a pod's, whatever a stale list says.
			if pid <= 1 || pid == self || signalled[pid] {
				continue
			}
			fresh++
			signalled[pid] = true
			if err := unix.Kill(pid, unix.SIGKILL); err != nil && !errors.Is(err, unix.ESRCH) {
				return len(signalled), fmt.Errorf("kill process %d of cgroup %s: %w", pid, dir, err)
			}
		}
		if fresh == 0 {
			return len(signalled), nil
		}
	}
	if passes == 1 {
		return len(signalled), nil
	}
	return len(signalled), fmt.Errorf("kill cgroup %s: processes still appearing after %d passes", dir, passes)
}

// writeExisting writes a control file that must exist (cgroupfs refuses
// to create one, with an error that is not ErrNotExist).
func writeExisting(path, value string) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(value)
	return errors.Join(err, f.Close())
}

// errThaw marks a cgroup left frozen: its signalled processes cannot die.
var errThaw = errors.New("could not thaw it")

// freezeWait bounds how long a cgroup may take to freeze: a process in an
// uninterruptible sleep holds the cgroup in FREEZING, and the kill falls
// back to reading the lists again.
const freezeWait = 100 * time.Millisecond

// freeze freezes the v1 freezer cgroup at dir and returns what thaws it.
// A cgroup that does not reach FROZEN within freezeWait is thawed and an
// error returned.
func freeze(dir string) (thaw func() error, err error) {
	state := filepath.Join(dir, "freezer.state")
	if err := writeExisting(state, "FROZEN"); err != nil {
		return nil, err
	}
	thaw = func() error { return writeExisting(state, "THAWED") }
	for deadline := time.Now().Add(freezeWait); ; time.Sleep(time.Millisecond) {
		b, err := os.ReadFile(state)
		if err == nil && strings.TrimSpace(string(b)) == "FROZEN" {
			return thaw, nil
		}
		if time.Now().After(deadline) {
			if err := thaw(); err != nil {
				return nil, fmt.Errorf("freeze %s: not frozen within %s, and %w: %w", dir, freezeWait, errThaw, err)
			}
			return nil, fmt.Errorf("freeze %s: not frozen within %s", dir, freezeWait)
		}
	}
}
