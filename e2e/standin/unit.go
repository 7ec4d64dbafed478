// Package standin stands in for sudo and systemctl on hosts without them
// (no systemd as PID 1, no sudo), so the upstream node suite can restart
// and reconfigure nodeagent as it does a kubelet: it finds the unit with
// `sudo systemctl list-units *kubelet* --state=running`, then kills,
// resets and restarts it, having written the new configuration to
// kubelet-config in its working directory (test/e2e_node/util.go).
//
// One unit is known, described by a JSON file (Unit) that the script
// starting the agent writes; nodetest runs as `systemctl` or `sudo` when
// invoked under those names.
package standin

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// EnvUnit names the unit file the stand-ins read.
const EnvUnit = "NODETEST_UNIT"

// Unit is the agent as a service.
type Unit struct {
	// Name is the unit's name without ".service" (kubelet-nodeagent: the
	// suite looks for kubelet-\w+).
	Name string `json:"name"`
	// Argv starts the agent.
	Argv []string `json:"argv"`
	// Config, when that file exists, replaces the value of Argv's
	// --config: the suite writes the configuration to restart with there.
	Config  string `json:"config,omitempty"`
	PIDFile string `json:"pidFile"`
	Log     string `json:"log"`
}

// LoadUnit reads the unit file.
func LoadUnit(path string) (*Unit, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("unit file: %w", err)
	}
	var u Unit
	if err := json.Unmarshal(b, &u); err != nil {
		return nil, fmt.Errorf("unit file %s: %w", path, err)
	}
	if u.Name == "" || len(u.Argv) == 0 || u.PIDFile == "" || u.Log == "" {
		return nil, fmt.Errorf("unit file %s: name, argv, pidFile and log are required", path)
	}
	return &u, nil
}

// Service is the unit's name as systemctl shows it.
func (u *Unit) Service() string { return u.Name + ".service" }

// matches reports whether a unit argument names this unit.
func (u *Unit) matches(arg string) bool {
	return arg == u.Name || arg == u.Service()
}

// pid is the running agent's process, 0 when none runs.
func (u *Unit) pid() int {
	b, err := os.ReadFile(u.PIDFile)
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0
	}
	if syscall.Kill(pid, 0) != nil || zombie(pid) {
		return 0
	}
	return pid
}

// zombie: a process that exited and waits for its parent.
func zombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// pid (comm) state ...: comm may hold spaces and parentheses.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && i+2 < len(s) && s[i+2] == 'Z'
}

// PID is the running agent's process ID, 0 when none runs.
func (u *Unit) PID() int { return u.pid() }

// Running reports whether the agent runs.
func (u *Unit) Running() bool { return u.pid() != 0 }

// argv is Argv with the suite's configuration file, once written.
func (u *Unit) argv() []string {
	argv := append([]string(nil), u.Argv...)
	if u.Config == "" {
		return argv
	}
	if _, err := os.Stat(u.Config); err != nil {
		return argv
	}
	for i := 0; i < len(argv); i++ {
		switch {
		case argv[i] == "--config" && i+1 < len(argv):
			argv[i+1] = u.Config
			return argv
		case strings.HasPrefix(argv[i], "--config="):
			argv[i] = "--config=" + u.Config
			return argv
		}
	}
	return append(argv, "--config", u.Config)
}

// Start starts the agent in a session of its own, its output appended to
// the log, unless it runs.
func (u *Unit) Start() error {
	if u.Running() {
		return nil
	}
	log, err := os.OpenFile(u.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer log.Close()
	argv := u.argv()
	fmt.Fprintf(log, "standin: starting %s: %s\n", u.Service(), strings.Join(argv, " "))
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", u.Service(), err)
	}
	pid := cmd.Process.Pid
	if err := os.MkdirAll(filepath.Dir(u.PIDFile), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(u.PIDFile, []byte(strconv.Itoa(pid)+"\n"), 0o644); err != nil {
		return err
	}
	// An agent that refuses its configuration exits at once with one line
	// naming the field: the start fails with it, so the spec does too.
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		return fmt.Errorf("%s exited at once (%v): %s", u.Service(), err, lastLine(u.Log))
	case <-time.After(startCheck):
		return nil
	}
}

// startCheck is how long Start watches the agent for an exit at once.
const startCheck = 2 * time.Second

// lastLine is the last line of a file, bounded.
func lastLine(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	last := lines[len(lines)-1]
	if len(last) > 500 {
		last = last[:500] + "..."
	}
	return last
}

// Signal sends sig to the agent, if it runs.
func (u *Unit) Signal(sig syscall.Signal) error {
	if pid := u.pid(); pid != 0 {
		return syscall.Kill(pid, sig)
	}
	return nil
}

// Stop sends SIGTERM and waits up to grace for the agent to exit, then
// SIGKILLs it.
func (u *Unit) Stop(grace time.Duration) error {
	pid := u.pid()
	if pid == 0 {
		return nil
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		return err
	}
	deadline := time.Now().Add(grace)
	for time.Now().Before(deadline) {
		if u.pid() == 0 {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	syscall.Kill(pid, syscall.SIGKILL)
	for range 50 {
		if u.pid() == 0 {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return errors.New(u.Service() + " did not stop after SIGKILL")
}
