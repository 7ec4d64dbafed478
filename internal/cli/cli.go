// Package cli is what nodeagent's commands share: exit statuses carried as
// errors, usage errors, and flags given anywhere among the words.
package cli

import (
	"errors"
	"flag"
	"fmt"
	"os"

	"nodeagent/internal/control"
)

// ExitCode is a status to exit with, carried out of a command as an error
// (the code of a command nodectl exec ran, a failed suite).
type ExitCode int

func (e ExitCode) Error() string { return fmt.Sprintf("exit code %d", int(e)) }

// UsageError is a command line that cannot be run: the process exits 2.
type UsageError string

func (e UsageError) Error() string { return string(e) }

// Exit ends the process of command cmd as err says: its ExitCode, or 1
// after printing it (2, with a pointer to --help, for a UsageError).
func Exit(cmd string, err error) {
	if err == nil {
		os.Exit(0)
	}
	var code ExitCode
	if errors.As(err, &code) {
		os.Exit(int(code))
	}
	var usage UsageError
	if errors.As(err, &usage) {
		fmt.Fprintf(os.Stderr, "%s: %v (see %s --help)\n", cmd, err, cmd)
		os.Exit(2)
	}
	fmt.Fprintf(os.Stderr, "%s: %v\n", cmd, err)
	os.Exit(1)
}

// AgentFlags registers --server (the agent's read-only API, default
// $NODEAGENT_SERVER or the kubelet's read-only port) and --control-socket
// ($NODEAGENT_CONTROL_SOCKET or control.DefaultSocket): how every command
// finds the agent.
func AgentFlags(fs *flag.FlagSet, server, controlSocket *string) {
	fs.StringVar(server, "server", EnvOr("NODEAGENT_SERVER", "http://127.0.0.1:10255"), "")
	fs.StringVar(controlSocket, "control-socket", EnvOr("NODEAGENT_CONTROL_SOCKET", control.DefaultSocket), "")
}

// EnvOr is $key, or def when it is unset or empty.
func EnvOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// Words parses args with fs, flags anywhere among the positional words,
// and returns the words in order.
func Words(fs *flag.FlagSet, args []string) ([]string, error) {
	var words []string
	for len(args) > 0 {
		if err := fs.Parse(args); err != nil {
			return nil, UsageError(err.Error())
		}
		args = fs.Args()
		if len(args) > 0 {
			words = append(words, args[0])
			args = args[1:]
		}
	}
	return words, nil
}
