// Package testhog turns a test binary into a memory hog for live cgroup
// tests: the test re-executes itself with Env set, places the child in a
// cgroup, then lets it allocate until the OOM killer ends it.
package testhog

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"testing"
)

// Env marks the child process.
const Env = "NODEAGENT_TEST_HOG"

// Main runs the hog when the process is one; call it first in TestMain.
func Main() {
	if os.Getenv(Env) == "" {
		return
	}
	// Say the runtime is up (fd 3, see Start), then wait for a line on
	// stdin: the process is in its cgroup by then.
	ready := os.NewFile(3, "ready")
	ready.Write([]byte{1})
	ready.Close()
	var b [1]byte
	os.Stdin.Read(b[:])
	var chunks [][]byte
	for {
		c := make([]byte, 1<<20)
		for i := range c {
			c[i] = 1
		}
		chunks = append(chunks, c)
		if len(chunks)%8 == 0 {
			fmt.Println(len(chunks))
		}
	}
}

// Hog is a started, still idle hog.
type Hog struct {
	Cmd   *exec.Cmd
	stdin io.WriteCloser
}

// Start starts the hog, waits until its runtime is up (Go raises its own
// open-files limit at start, so process facts settle only then) and writes
// its pid into each cgroup.procs file.
func Start(t *testing.T, procs ...string) *Hog {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), Env+"=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	ready, readyW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer ready.Close()
	cmd.ExtraFiles = []*os.File{readyW}
	err = cmd.Start()
	readyW.Close()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	var b [1]byte
	if _, err := io.ReadFull(ready, b[:]); err != nil {
		t.Fatalf("the hog did not start: %v", err)
	}
	for _, p := range procs {
		if err := os.WriteFile(p, []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return &Hog{Cmd: cmd, stdin: stdin}
}

// Go starts the allocation.
func (h *Hog) Go() { h.stdin.Write([]byte("\n")) }
