package cgroups

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

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
// A missing cgroup is success: there is nothing left to kill.
func Kill(dir string) (int, error) {
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	switch err := writeExisting(filepath.Join(dir, "cgroup.kill"), "1"); {
	case err == nil:
		return 0, nil
	case !errors.Is(err, os.ErrNotExist):
		return 0, fmt.Errorf("kill cgroup %s: %w", dir, err)
	}
	self := os.Getpid()
	signalled := map[int]bool{}
	for pass := 0; pass < killPasses; pass++ {
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
	return len(signalled), fmt.Errorf("kill cgroup %s: processes still appearing after %d passes", dir, killPasses)
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
