package cgroups

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// sleepers starts n processes that only wait to be killed.
func sleepers(t *testing.T, n int) []*exec.Cmd {
	t.Helper()
	var cmds []*exec.Cmd
	for i := 0; i < n; i++ {
		cmd := exec.Command("sleep", "300")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		cmds = append(cmds, cmd)
	}
	return cmds
}

func killedBySIGKILL(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("process %d still runs 10 s after the kill", cmd.Process.Pid)
	}
	ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Errorf("process %d ended with %v, want SIGKILL", cmd.Process.Pid, cmd.ProcessState)
	}
}

// TestKillSignalsEveryListedProcess is the v1 path (and v2 before Linux
// 5.14): a pod cgroup whose processes are in its containers' cgroups.
func TestKillSignalsEveryListedProcess(t *testing.T) {
	pod := filepath.Join(t.TempDir(), "kubepods", "podabc")
	procs := sleepers(t, 3)
	layout := map[string][]*exec.Cmd{"": nil, "sandbox": procs[:1], "ctr1": procs[1:3]}
	for sub, cmds := range layout {
		dir := filepath.Join(pod, sub)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		var lines []string
		for _, c := range cmds {
			lines = append(lines, fmt.Sprint(c.Process.Pid))
		}
		if sub == "" {
			// A stale entry naming the agent itself and init is never signalled.
			lines = append(lines, fmt.Sprint(os.Getpid()), "1")
		}
		if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	n, err := Kill(pod, "")
	if err != nil {
		t.Fatal(err)
	}
	if n != 3 {
		t.Errorf("signalled %d processes, want 3", n)
	}
	for _, c := range procs {
		killedBySIGKILL(t, c)
	}
}

// TestKillWritesCgroupKill is the v2 path: one write to cgroup.kill, and
// no process is signalled one by one.
func TestKillWritesCgroupKill(t *testing.T) {
	pod := t.TempDir()
	proc := sleepers(t, 1)[0]
	files := map[string]string{"cgroup.kill": "", "cgroup.procs": fmt.Sprintln(proc.Process.Pid)}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(pod, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	n, err := Kill(pod, "")
	if err != nil || n != 0 {
		t.Fatalf("Kill = %d, %v; want 0 processes signalled by the agent, no error", n, err)
	}
	if b, _ := os.ReadFile(filepath.Join(pod, "cgroup.kill")); string(b) != "1" {
		t.Errorf("cgroup.kill holds %q, want 1", b)
	}
	if err := proc.Process.Signal(syscall.Signal(0)); err != nil {
		t.Errorf("the process was signalled directly (%v); the kernel does it on v2", err)
	}
}

func TestKillOfAMissingCgroupIsSuccess(t *testing.T) {
	if n, err := Kill(filepath.Join(t.TempDir(), "gone"), ""); n != 0 || err != nil {
		t.Errorf("Kill = %d, %v; want 0, nil", n, err)
	}
}

func TestKillReportsAnUnreadableList(t *testing.T) {
	pod := t.TempDir()
	// A directory where the list should be: reading it fails.
	if err := os.Mkdir(filepath.Join(pod, "cgroup.procs"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Kill(pod, ""); err == nil || !strings.Contains(err.Error(), pod) {
		t.Errorf("err = %v, want one naming %s", err, pod)
	}
}

// zombie reports whether a child process has ended (killed, not yet
// reaped).
func zombie(t *testing.T, pid int) bool {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return len(f) > 0 && f[0] == "Z"
}

// On v1 every listed process is signalled at once, then the cgroup is
// frozen, what forked meanwhile is signalled while frozen, and the cgroup
// thawed after (runc's order, without making the first signals wait for
// a freeze).
func TestKillSignalsFreezesSignalsThaws(t *testing.T) {
	pod := t.TempDir()
	procs := sleepers(t, 3)
	writeProcs := func(cmds ...*exec.Cmd) {
		var lines []string
		for _, c := range cmds {
			lines = append(lines, fmt.Sprint(c.Process.Pid))
		}
		os.WriteFile(filepath.Join(pod, "cgroup.procs"), []byte(strings.Join(lines, "\n")+"\n"), 0o644)
	}
	writeProcs(procs[:2]...)
	alive := func() int {
		n := 0
		for _, c := range procs {
			if !zombie(t, c.Process.Pid) {
				n++
			}
		}
		return n
	}
	var order []string
	n, err := kill(pod, func() (func() error, error) {
		time.Sleep(50 * time.Millisecond) // the kernel's delivery
		order = append(order, fmt.Sprintf("freeze with %d alive", alive()))
		writeProcs(procs...) // one forked before the freeze
		return func() error {
			time.Sleep(50 * time.Millisecond)
			order = append(order, fmt.Sprintf("thaw with %d alive", alive()))
			return nil
		}, nil
	})
	if err != nil || n != 3 {
		t.Fatalf("kill = %d, %v; want 3 signalled", n, err)
	}
	if want := []string{"freeze with 1 alive", "thaw with 0 alive"}; strings.Join(order, "; ") != strings.Join(want, "; ") {
		t.Errorf("order %q, want %q", order, want)
	}
	// A thaw that fails is an error: frozen, the processes never die.
	_, err = kill(pod, func() (func() error, error) {
		return func() error { return errors.New("EBUSY") }, nil
	})
	if err == nil || !strings.Contains(err.Error(), "thaw") {
		t.Errorf("a failed thaw: %v", err)
	}
	// A real v1 freezer directory is left THAWED.
	freezer := t.TempDir()
	os.WriteFile(filepath.Join(freezer, "freezer.state"), []byte("THAWED"), 0o644)
	if _, err := Kill(pod, freezer); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(freezer, "freezer.state")); string(b) != "THAWED" {
		t.Errorf("freezer.state %q after the kill, want THAWED", b)
	}
}

// RemovePod never signals init or the agent, whatever a stale list says,
// and still removes the cgroup.
func TestRemovePodSparesInitAndTheAgent(t *testing.T) {
	m := &listingManager{memManager: &memManager{sets: map[string]*ResourceConfig{}}, pids: []int{1, os.Getpid()}}
	tree := NewTree(m, TreeConfig{PerQOS: true})
	if err := tree.RemovePod(Name{"kubepods", "podx"}); err != nil {
		t.Fatal(err)
	}
	if !m.removed {
		t.Error("the cgroup was not removed")
	}
}

// listingManager lists fixed pids and records Remove.
type listingManager struct {
	*memManager
	pids    []int
	removed bool
}

func (m *listingManager) Pids(Name) ([]int, error) { return m.pids, nil }
func (m *listingManager) Remove(Name) error        { m.removed = true; return nil }
func (m *listingManager) Path(Name) string         { return "/nonexistent" }
