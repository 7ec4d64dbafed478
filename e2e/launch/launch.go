// Package launch starts nodeagent processes outside systemd: for the
// integration tests, the benchmarks, the experiments and the conformance
// script. Each agent gets its own directory, port, node name, cgroup root
// and control socket, so agents beside each other (and beside a live one)
// never take each other's pods or cgroups for leftovers.
package launch

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"nodeagent/api"
	"nodeagent/internal/mounts"
)

// Options say how to start an agent. Bin, RuntimeEndpoint and Dir are
// required; the rest have defaults.
type Options struct {
	Bin             string // the nodeagent binary
	RuntimeEndpoint string
	// Dir holds everything the agent has: config.yaml, manifests/, logs/,
	// root/, control.sock and, by default, agent.log.
	Dir        string
	NodeName   string // default "nodeagent-<random>"
	CgroupRoot string // default "/<NodeName>"
	Port       int    // the read-only API; default a free port
	// Address is where the agent listens (the config's address);
	// default 127.0.0.1.
	Address string
	// HealthzPort is the healthz port's; default a free port.
	HealthzPort int
	// KubeletPort is the kubelet server's (API-server mode); default a
	// free port.
	KubeletPort int
	// Config is more KubeletConfiguration fields (YAML), after the ones
	// the launcher sets.
	Config   string
	Args     []string  // more flags
	Env      []string  // more environment
	Output   io.Writer // the agent's stdout and stderr; default Dir/agent.log
	LogLevel string    // default debug
	// FileCheckFrequency is the manifest rescan period (default 2 s;
	// inotify sees changes at once either way).
	FileCheckFrequency time.Duration
}

// Agent is one agent: its paths, its API client and its process.
type Agent struct {
	Options
	ConfigFile    string
	Manifests     string
	LogsDir       string
	RootDir       string
	ControlSocket string
	Client        *api.Client
	// Ready tells Start the agent is up; nil: its /healthz passes.
	Ready func(context.Context) error

	mu     sync.Mutex
	cmd    *exec.Cmd
	done   chan struct{} // closed when the process ends
	err    error         // its exit error, once done
	output *os.File      // Dir/agent.log when Output is unset
}

// New fills in the defaults and writes the agent's config; Start runs it.
func New(opts Options) (*Agent, error) {
	if opts.Bin == "" || opts.RuntimeEndpoint == "" || opts.Dir == "" {
		return nil, errors.New("launch: Bin, RuntimeEndpoint and Dir are required")
	}
	if err := fillIdentity(&opts.Dir, &opts.NodeName, &opts.CgroupRoot, "nodeagent-", &opts.Port, &opts.KubeletPort, &opts.HealthzPort); err != nil {
		return nil, err
	}
	if opts.Address == "" {
		opts.Address = "127.0.0.1"
	}
	if opts.LogLevel == "" {
		opts.LogLevel = "debug"
	}
	if opts.FileCheckFrequency <= 0 {
		opts.FileCheckFrequency = 2 * time.Second
	}
	a := &Agent{Options: opts, ConfigFile: filepath.Join(opts.Dir, "config.yaml"), Manifests: filepath.Join(opts.Dir, "manifests"),
		LogsDir: filepath.Join(opts.Dir, "logs"), RootDir: filepath.Join(opts.Dir, "root"), ControlSocket: filepath.Join(opts.Dir, "control.sock")}
	a.Client = api.NewClient(a.URL(""), a.ControlSocket)
	for _, d := range []string{a.Manifests, a.LogsDir, a.RootDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	config := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
containerRuntimeEndpoint: %s
staticPodPath: %s
podLogsDir: %s
cgroupRoot: %s
address: %s
readOnlyPort: %d
port: %d
healthzPort: %d
fileCheckFrequency: %s
# The test hosts include cgroup v1 ones, where the kubelet's default
# (true since 1.35) would refuse to start.
failCgroupV1: false
`, opts.RuntimeEndpoint, a.Manifests, a.LogsDir, opts.CgroupRoot, opts.Address, opts.Port, opts.KubeletPort, opts.HealthzPort, opts.FileCheckFrequency)
	config, err := withConfig(config, opts.Config)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(a.ConfigFile, []byte(config), 0o644); err != nil {
		return nil, err
	}
	return a, nil
}

// fillIdentity fills in what every launched node needs of its own: an
// absolute Dir (its configuration names paths below it), a node name
// (prefix and random hex), a cgroup root named after it, and free ports
// that differ (a port just freed can come back at the next ask).
func fillIdentity(dir, name, cgroupRoot *string, prefix string, ports ...*int) error {
	abs, err := filepath.Abs(*dir)
	if err != nil {
		return err
	}
	*dir = abs
	if *name == "" {
		b := make([]byte, 4)
		rand.Read(b)
		*name = prefix + hex.EncodeToString(b)
	}
	if *cgroupRoot == "" {
		*cgroupRoot = "/" + *name
	}
	taken := map[int]bool{0: true}
	for _, p := range ports {
		taken[*p] = true
	}
	for _, p := range ports {
		for *p == 0 {
			port, err := FreePort()
			if err != nil {
				return err
			}
			if !taken[port] {
				*p, taken[port] = port, true
			}
		}
	}
	return nil
}

// FreePort is a TCP port on 127.0.0.1 nobody listens on now.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// URL is a path on the agent's read-only API.
func (a *Agent) URL(path string) string {
	return "http://" + net.JoinHostPort(a.Address, strconv.Itoa(a.Port)) + path
}

// Command is the agent's command line with its environment, not started:
// for a start that is meant to fail.
func (a *Agent) Command() *exec.Cmd {
	cmd := exec.Command(a.Bin, "--config", a.ConfigFile, "--hostname-override", a.NodeName,
		"--root-dir", a.RootDir, "--control-socket", a.ControlSocket, "--log-level", a.LogLevel)
	cmd.Args = append(cmd.Args, a.Args...)
	cmd.Env = append(os.Environ(), a.Env...)
	return cmd
}

// Start runs the agent and waits until its /healthz passes, for at most
// timeout. An agent that exits first is an error with the end of its
// output. Start may be called again after Stop, to restart the agent.
func (a *Agent) Start(ctx context.Context, timeout time.Duration) error {
	a.mu.Lock()
	if a.cmd != nil {
		a.mu.Unlock()
		return errors.New("launch: the agent is running")
	}
	cmd := a.Command()
	out := a.Output
	if out == nil {
		f, err := os.OpenFile(a.LogPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			a.mu.Unlock()
			return err
		}
		a.output, out = f, f
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		a.mu.Unlock()
		return fmt.Errorf("start %s: %w", a.Bin, err)
	}
	done := make(chan struct{})
	a.cmd, a.done, a.err = cmd, done, nil
	go func() {
		err := cmd.Wait()
		a.mu.Lock()
		a.err = err
		a.mu.Unlock()
		close(done)
	}()
	a.mu.Unlock()

	deadline := time.Now().Add(timeout)
	ready := a.Ready
	if ready == nil {
		ready = a.Client.Healthz
	}
	for {
		if ready(ctx) == nil {
			return nil
		}
		select {
		case <-done:
			return fmt.Errorf("the agent exited (%v): %s", a.ExitErr(), a.tail(5))
		case <-ctx.Done():
			a.Stop(10 * time.Second)
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			a.Stop(10 * time.Second)
			return fmt.Errorf("the agent was not healthy within %s: %s", timeout, a.tail(5))
		}
	}
}

// tailBytes bounds what an error quotes of the agent's log.
const tailBytes = 64 << 10

// LogPath is where the agent's output goes when Output is unset.
func (a *Agent) LogPath() string { return filepath.Join(a.Dir, "agent.log") }

// tail is the last n lines of the agent's log file ("" with Output set).
func (a *Agent) tail(n int) string {
	if a.Output != nil {
		return "(output went to the caller)"
	}
	return tailFile(a.LogPath(), n)
}

// tailFile is the last n lines of a log file: its end only, as a debug
// log can be large.
func tailFile(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > tailBytes {
		f.Seek(st.Size()-tailBytes, io.SeekStart)
	}
	b, _ := io.ReadAll(io.LimitReader(f, tailBytes))
	lines := strings.Split(string(bytes.TrimSpace(b)), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// Exited is closed when the running agent's process ends (nil before
// the first Start).
func (a *Agent) Exited() <-chan struct{} {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.done
}

// ExitErr is the last process's exit error, once it ended.
func (a *Agent) ExitErr() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.err
}

// Pid is the running agent's process ID (0 when none runs).
func (a *Agent) Pid() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cmd == nil {
		return 0
	}
	return a.cmd.Process.Pid
}

// Signal sends the running agent sig.
func (a *Agent) Signal(sig os.Signal) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cmd == nil {
		return errors.New("launch: the agent is not running")
	}
	return a.cmd.Process.Signal(sig)
}

// Stop sends SIGTERM and waits up to timeout for the agent to exit, then
// kills it. It returns the exit error (nil for a clean exit, or when no
// agent runs). Pods keep running: remove their manifests first.
func (a *Agent) Stop(timeout time.Duration) error {
	a.mu.Lock()
	cmd, done := a.cmd, a.done
	a.mu.Unlock()
	if cmd == nil {
		return nil
	}
	err := fmt.Errorf("the agent did not stop within %s of SIGTERM", timeout)
	if Terminate(cmd.Process, done, timeout) {
		err = a.ExitErr()
	}
	a.mu.Lock()
	a.cmd = nil
	if a.output != nil {
		a.output.Close()
		a.output = nil
	}
	a.mu.Unlock()
	return err
}

// RemoveMounts detaches what the agent left mounted in its root
// directory: the pods' volumes, and the root's own shared bind (the agent
// keeps it, as the kubelet does).
func (a *Agent) RemoveMounts() error { return mounts.UnmountTree(a.RootDir) }

// RemoveCgroups removes the agent's cgroup root, deepest first, in every
// hierarchy (v1 controllers and the v2 unified tree). Only empty cgroups
// go: stop the pods first.
func (a *Agent) RemoveCgroups() { removeCgroupRoot(a.CgroupRoot) }

func removeTree(dir string) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.IsDir() {
			removeTree(filepath.Join(dir, e.Name()))
		}
	}
	syscall.Rmdir(dir)
}

// Terminate sends p SIGTERM and waits for done (closed when p has been
// reaped); after timeout it kills p and waits. It reports whether p
// ended within timeout.
func Terminate(p *os.Process, done <-chan struct{}, timeout time.Duration) bool {
	p.Signal(syscall.SIGTERM)
	select {
	case <-done:
		return true
	case <-time.After(timeout):
		p.Kill()
		<-done
		return false
	}
}
