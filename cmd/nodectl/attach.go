package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/signal"

	"golang.org/x/sys/unix"
	"golang.org/x/term"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"

	"nodeagent/cri"
)

// execInteractive runs cmd attached to this terminal through the runtime's
// streaming server (CRI Exec + SPDY, as kubectl exec does), and returns the
// command's exit code.
func (c *client) execInteractive(name, container string, cmd []string, stdin, tty bool) (int, error) {
	if tty && !term.IsTerminal(int(os.Stdin.Fd())) {
		fmt.Fprintln(os.Stderr, "nodectl: unable to use a TTY: input is not a terminal")
		tty = false
	}
	rt, id, err := c.execTarget(name, container, cmd)
	if err != nil {
		return 0, err
	}
	defer rt.Close()
	ctx := context.Background()
	raw, err := rt.Exec(ctx, id, cmd, cri.Streams{Stdin: stdin, Stdout: true, Stderr: !tty, TTY: tty})
	if err != nil {
		return 0, err
	}
	u, err := url.Parse(raw)
	if err != nil {
		return 0, fmt.Errorf("runtime streaming URL %q: %w", raw, err)
	}
	executor, err := remotecommand.NewSPDYExecutor(&rest.Config{}, "POST", u)
	if err != nil {
		return 0, err
	}
	opts := remotecommand.StreamOptions{Stdout: os.Stdout, Tty: tty}
	if stdin {
		opts.Stdin = os.Stdin
	}
	if !tty {
		opts.Stderr = os.Stderr
	}
	if tty {
		fd := int(os.Stdin.Fd())
		state, err := term.MakeRaw(fd)
		if err != nil {
			return 0, err
		}
		defer term.Restore(fd, state)
		sizes := &terminalSizes{fd: fd, ch: make(chan remotecommand.TerminalSize, 1)}
		stop := sizes.watch()
		defer stop()
		opts.TerminalSizeQueue = sizes
	}
	err = executor.StreamWithContext(ctx, opts)
	var exitErr utilexec.CodeExitError
	if errors.As(err, &exitErr) {
		return exitErr.Code, nil
	}
	return 0, err
}

// terminalSizes reports the terminal's size now and after every SIGWINCH.
type terminalSizes struct {
	fd int
	ch chan remotecommand.TerminalSize
}

func (t *terminalSizes) Next() *remotecommand.TerminalSize {
	s, ok := <-t.ch
	if !ok {
		return nil
	}
	return &s
}

func (t *terminalSizes) send() {
	if w, h, err := term.GetSize(t.fd); err == nil {
		select {
		case t.ch <- remotecommand.TerminalSize{Width: uint16(w), Height: uint16(h)}:
		default:
		}
	}
}

func (t *terminalSizes) watch() (stop func()) {
	t.send()
	winch := make(chan os.Signal, 1)
	signal.Notify(winch, unix.SIGWINCH)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-winch:
				t.send()
			case <-done:
				return
			}
		}
	}()
	return func() {
		signal.Stop(winch)
		close(done)
		close(t.ch)
	}
}
