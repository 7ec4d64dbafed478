// Command pause is the sandbox ("infra") container of every pod: it holds the
// pod's namespaces open, reaps zombies (it is PID 1 of a shared PID namespace
// when one is used) and exits 0 on SIGINT or SIGTERM.
package main

import (
	"os"
	"os/signal"

	"golang.org/x/sys/unix"
)

func main() {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, unix.SIGINT, unix.SIGTERM, unix.SIGCHLD)
	for sig := range sigs {
		if sig == unix.SIGCHLD {
			reap()
			continue
		}
		os.Exit(0)
	}
}

// reap collects every exited child without blocking.
func reap() {
	for {
		var status unix.WaitStatus
		pid, err := unix.Wait4(-1, &status, unix.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}
