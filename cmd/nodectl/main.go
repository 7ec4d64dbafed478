// Command nodectl is the command-line client of a nodeagent: it reads the
// agent's local API (pods, node, config) and manages manifests in the
// agent's static pod directory.
//
//	nodectl get pods [-o wide|json|yaml]
//	nodectl get pod NAME [-o json|yaml]
//	nodectl get node [-o json|yaml]
//	nodectl describe pod NAME
//	nodectl describe node
//	nodectl events [--pod NAME] [-o json|yaml]
//	nodectl apply -f FILE
//	nodectl delete pod NAME [--wait]
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

const usage = `nodectl talks to a nodeagent's local API and manages its static pod manifests.

Usage:
  nodectl get pods [-o wide|json|yaml]    list pods with their status
  nodectl get pod NAME [-o json|yaml]     one pod
  nodectl get node [-o json|yaml]         the node
  nodectl describe pod NAME               details: status, cgroup, containers, conditions
  nodectl describe node                   capacity, allocatable, conditions, system info
  nodectl events [--pod NAME]             the agent's events (pulls, starts, kills, back-offs, rejections)
  nodectl apply -f FILE                   validate a Pod manifest and put it in the manifest directory
  nodectl delete pod NAME [--wait]        remove the pod's manifest (the agent stops the pod)

Global flags:
  --server URL         the agent's read-only API (default http://127.0.0.1:10255, or $NODEAGENT_SERVER)
  --manifest-dir DIR   the static pod directory (default: the agent's staticPodPath from /configz)

NAME is the pod name as listed (with the node suffix) or as written in its manifest.
`

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "nodectl:", err)
		var ue usageError
		if errors.As(err, &ue) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

type usageError string

func (e usageError) Error() string { return string(e) + " (see nodectl --help)" }

func run(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("nodectl", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	server := fs.String("server", envOr("NODEAGENT_SERVER", "http://127.0.0.1:10255"), "")
	manifestDir := fs.String("manifest-dir", "", "")
	output := fs.String("o", "", "")
	file := fs.String("f", "", "")
	wait := fs.Bool("wait", false, "")
	podFilter := fs.String("pod", "", "")
	help := fs.Bool("help", false, "")
	fs.BoolVar(help, "h", false, "")

	// Flags may come anywhere: split them from the positional words.
	var words []string
	for len(args) > 0 {
		if err := fs.Parse(args); err != nil {
			return usageError(err.Error())
		}
		args = fs.Args()
		if len(args) > 0 {
			words = append(words, args[0])
			args = args[1:]
		}
	}
	if *help || len(words) == 0 {
		fmt.Fprint(out, usage)
		return nil
	}
	c := &client{server: strings.TrimRight(*server, "/"), manifestDir: *manifestDir, out: out}
	verb, rest := words[0], words[1:]
	switch {
	case verb == "get" && len(rest) == 1 && (rest[0] == "pods" || rest[0] == "pod" || rest[0] == "po"):
		return c.getPods(*output)
	case verb == "get" && len(rest) == 2 && (rest[0] == "pod" || rest[0] == "pods" || rest[0] == "po"):
		return c.getPod(rest[1], *output)
	case verb == "get" && len(rest) == 1 && (rest[0] == "node" || rest[0] == "nodes" || rest[0] == "no"):
		return c.getNode(*output)
	case verb == "describe" && len(rest) == 2 && (rest[0] == "pod" || rest[0] == "pods" || rest[0] == "po"):
		return c.describePod(rest[1])
	case verb == "describe" && len(rest) >= 1 && (rest[0] == "node" || rest[0] == "nodes" || rest[0] == "no"):
		return c.describeNode()
	case verb == "events" && len(rest) == 0:
		return c.listEvents(*podFilter, *output)
	case verb == "apply" && len(rest) == 0:
		if *file == "" {
			return usageError("apply needs -f FILE")
		}
		return c.apply(*file)
	case verb == "delete" && len(rest) == 2 && (rest[0] == "pod" || rest[0] == "pods" || rest[0] == "po"):
		return c.deletePod(rest[1], *wait)
	}
	return usageError(fmt.Sprintf("unknown command %q", strings.Join(words, " ")))
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
