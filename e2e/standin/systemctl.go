package standin

import (
	"fmt"
	"io"
	"path"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// stopGrace is how long stop and restart wait for the agent to exit on
// SIGTERM (systemd's default TimeoutStopSec).
const stopGrace = 90 * time.Second

// ExitError is a failure with systemctl's exit code.
type ExitError struct {
	Code int
	Msg  string
}

func (e *ExitError) Error() string { return e.Msg }

// Systemctl runs the verbs the node suite uses on the unit: list-units,
// is-active, status, start, stop, restart, kill and reset-failed. Other
// units are not found (exit 5, as systemctl), other verbs refused.
func Systemctl(u *Unit, args []string, out io.Writer) error {
	var verb string
	var units []string
	state, signal := "", syscall.SIGTERM
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-s" || a == "--signal":
			if i+1 == len(args) {
				return &ExitError{1, "systemctl: " + a + " needs a signal"}
			}
			i++
			s, err := parseSignal(args[i])
			if err != nil {
				return err
			}
			signal = s
		case strings.HasPrefix(a, "--signal="):
			s, err := parseSignal(strings.TrimPrefix(a, "--signal="))
			if err != nil {
				return err
			}
			signal = s
		case strings.HasPrefix(a, "--state="):
			state = strings.TrimPrefix(a, "--state=")
		case strings.HasPrefix(a, "-"):
			// --no-pager, --all, --no-legend, --plain, -q: no effect here.
		case verb == "":
			verb = a
		default:
			units = append(units, a)
		}
	}
	if verb == "list-units" {
		return listUnits(u, units, state, out)
	}
	if verb == "" {
		return &ExitError{1, "systemctl: no verb (the stand-in knows list-units, is-active, status, start, stop, restart, kill, reset-failed)"}
	}
	if len(units) == 0 {
		if verb == "reset-failed" {
			return nil
		}
		return &ExitError{1, "systemctl " + verb + ": no unit named"}
	}
	for _, name := range units {
		if !u.matches(name) {
			return &ExitError{5, fmt.Sprintf("Failed to %s %s: Unit %s not found (the stand-in knows only %s).", verb, name, name, u.Service())}
		}
	}
	switch verb {
	case "reset-failed":
		return nil
	case "is-active":
		if u.Running() {
			fmt.Fprintln(out, "active")
			return nil
		}
		fmt.Fprintln(out, "inactive")
		return &ExitError{3, ""}
	case "status":
		active := "inactive (dead)"
		if pid := u.pid(); pid != 0 {
			active = fmt.Sprintf("active (running), main PID %d", pid)
		}
		fmt.Fprintf(out, "● %s - nodeagent (stand-in unit)\n     Active: %s\n", u.Service(), active)
		if !u.Running() {
			return &ExitError{3, ""}
		}
		return nil
	case "start":
		return u.Start()
	case "stop":
		return u.Stop(stopGrace)
	case "restart":
		if err := u.Stop(stopGrace); err != nil {
			return err
		}
		return u.Start()
	case "kill":
		return u.Signal(signal)
	}
	return &ExitError{1, "systemctl: the stand-in does not know the verb " + verb}
}

// listUnits prints the table systemctl prints, with the unit when it
// matches a pattern (none: all) and the state filter.
func listUnits(u *Unit, patterns []string, state string, out io.Writer) error {
	running := u.Running()
	show := len(patterns) == 0
	for _, p := range patterns {
		if ok, _ := path.Match(p, u.Service()); ok || u.matches(p) {
			show = true
		}
	}
	active, sub := "inactive", "dead"
	if running {
		active, sub = "active", "running"
	}
	if state != "" {
		keep := false
		for _, s := range strings.Split(state, ",") {
			keep = keep || s == active || s == sub || s == "loaded"
		}
		show = show && keep
	}
	fmt.Fprintln(out, "  UNIT                          LOAD   ACTIVE   SUB     DESCRIPTION")
	n := 0
	if show {
		fmt.Fprintf(out, "  %-29s loaded %-8s %-7s nodeagent (stand-in unit)\n", u.Service(), active, sub)
		n = 1
	}
	fmt.Fprintf(out, "\n%d loaded units listed.\n", n)
	return nil
}

func parseSignal(s string) (syscall.Signal, error) {
	name := strings.ToUpper(strings.TrimPrefix(strings.ToUpper(s), "SIG"))
	if n := unix.SignalNum("SIG" + name); n != 0 {
		return n, nil
	}
	return 0, &ExitError{1, "systemctl: unknown signal " + s}
}
