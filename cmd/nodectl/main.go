// Command nodectl is the command-line client of a nodeagent: it reads the
// agent's local API (pods, node, config) and manages manifests in the
// agent's static pod directory.
//
//	nodectl get pods [-o wide|json|yaml]
//	nodectl get pod NAME [-o json|yaml]
//	nodectl get node [-o json|yaml]
//	nodectl get evictions [-o json|yaml]
//	nodectl describe pod NAME
//	nodectl describe node
//	nodectl events [--pod NAME] [-o json|yaml]
//	nodectl logs POD [-c C | --all-containers] [-f] [--previous] [--tail N] [--timestamps] [--since D | --since-time T] [--limit-bytes N] [--prefix]
//	nodectl exec POD [-c C] [-i] [-t] [--timeout D] -- CMD [ARGS...]
//	nodectl apply -f FILE
//	nodectl delete pod NAME [--grace-period N] [--wait]
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"nodeagent/api"
	"nodeagent/internal/cli"
)

const usage = `nodectl talks to a nodeagent's local API and manages its static pod manifests.

Usage:
  nodectl get pods [-o wide|json|yaml]    list pods with their status
  nodectl get pod NAME [-o json|yaml]     one pod
  nodectl get node [-o json|yaml]         the node
  nodectl get evictions [-o json|yaml]    the last eviction decisions: signal, threshold, victims, timings
  nodectl top pods [--containers]         pods' CPU (millicores) and memory working set, from /stats/summary
  nodectl top node                        the node's CPU and memory use, and their share of capacity
  nodectl cgroups [-o json|yaml]          the QoS cgroup tree: CPU shares and quota, memory limit and use, pids
  nodectl conformance [FLAGS]             run the node conformance suite against the agent (nodetest
                                          conformance: see nodetest --help)
  nodectl experiment run|compare ...      run or compare OOM stress experiments (nodetest experiment)
  nodectl describe pod NAME               details: status, cgroup, containers, conditions
  nodectl describe node                   capacity, allocatable, conditions, system info
  nodectl events [--pod NAME]             the agent's events (pulls, starts, kills, back-offs, rejections)
  nodectl logs POD [-c C | --all-containers] [-f] [--previous] [--tail N] [--timestamps]
               [--since D | --since-time T] [--limit-bytes N] [--prefix]
                                          a container's log (the default container without -c), read
                                          with the kubelet's reader: -f follows across rotation
  nodectl exec POD [-c C] [-i] [-t] [--timeout D] -- CMD [ARGS...]
                                          run a command in a container and exit with its code;
                                          -i passes stdin, -t gives it a terminal (-it for both)
  nodectl apply -f FILE                   validate a Pod manifest; the agent writes it into its manifest directory
  nodectl delete pod NAME [--grace-period N] [--wait]
                                          the agent removes the pod's manifest and stops the pod;
                                          --grace-period overrides the pod's (0: kill at once)

Global flags:
  --server URL           the agent's read-only API (default http://127.0.0.1:10255, or $NODEAGENT_SERVER)
  --control-socket PATH  the agent's root-only control socket (default /run/nodeagent/nodeagent.sock, or
                         $NODEAGENT_CONTROL_SOCKET): apply, delete, logs, exec and conformance act
                         through it, and only if the process behind it runs as root
  --manifest-dir DIR     apply and delete write or remove DIR/NAME.yaml directly, without the agent

What the read-only API says is shown, never acted on: nodectl derives no path from it.

NAME is the pod name as listed (with the node suffix) or as written in its manifest.
`

func main() { cli.Exit("nodectl", run(os.Args[1:], os.Stdout)) }

// flags holds every option; which ones a verb accepts is decided in newFlags.
type flags struct {
	server, manifestDir, output, file, podFilter, container        string
	controlSocket                                                  string
	wait, follow, previous, timestamps, interactive, tty, it, help bool
	containers, allContainers, prefix                              bool
	tail, limitBytes                                               int64
	since                                                          time.Duration
	sinceTime                                                      string
	timeout                                                        time.Duration
	grace                                                          int64
}

// newFlags registers the global flags and those of verb (so that -f can be
// apply's file and logs' follow, as in kubectl).
func newFlags(verb string) (*flag.FlagSet, *flags) {
	fs := flag.NewFlagSet("nodectl", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	f := &flags{}
	cli.AgentFlags(fs, &f.server, &f.controlSocket)
	fs.StringVar(&f.manifestDir, "manifest-dir", "", "")
	fs.BoolVar(&f.help, "help", false, "")
	fs.BoolVar(&f.help, "h", false, "")
	switch verb {
	case "top":
		fs.BoolVar(&f.containers, "containers", false, "")
	case "get", "events", "cgroups":
		fs.StringVar(&f.output, "o", "", "")
		fs.StringVar(&f.podFilter, "pod", "", "")
	case "apply":
		fs.StringVar(&f.file, "f", "", "")
	case "delete":
		fs.BoolVar(&f.wait, "wait", false, "")
		fs.Int64Var(&f.grace, "grace-period", -1, "")
	case "logs":
		fs.StringVar(&f.container, "c", "", "")
		fs.BoolVar(&f.follow, "f", false, "")
		fs.BoolVar(&f.follow, "follow", false, "")
		fs.BoolVar(&f.previous, "previous", false, "")
		fs.BoolVar(&f.previous, "p", false, "")
		fs.Int64Var(&f.tail, "tail", -1, "")
		fs.BoolVar(&f.timestamps, "timestamps", false, "")
		fs.DurationVar(&f.since, "since", 0, "")
		fs.StringVar(&f.sinceTime, "since-time", "", "")
		fs.Int64Var(&f.limitBytes, "limit-bytes", 0, "")
		fs.BoolVar(&f.allContainers, "all-containers", false, "")
		fs.BoolVar(&f.prefix, "prefix", false, "")
	case "exec":
		fs.StringVar(&f.container, "c", "", "")
		fs.BoolVar(&f.interactive, "i", false, "")
		fs.BoolVar(&f.tty, "t", false, "")
		fs.BoolVar(&f.it, "it", false, "")
		fs.BoolVar(&f.it, "ti", false, "")
		fs.DurationVar(&f.timeout, "timeout", 0, "")
	}
	return fs, f
}

// verbOf finds the verb: the first word that is not a flag or the value of
// a global flag.
func verbOf(args []string) string {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") {
			return a
		}
		if name := strings.TrimLeft(a, "-"); name == "server" || name == "manifest-dir" || name == "control-socket" {
			i++
		}
	}
	return ""
}

func run(args []string, out io.Writer) error {
	// The suites that start agents and write cgroups live in nodetest.
	if verb := verbOf(args); verb == "conformance" || verb == "experiment" {
		return runNodetest(verb, args)
	}
	// Everything after "--" is the command of exec.
	var command []string
	for i, a := range args {
		if a == "--" {
			args, command = args[:i], args[i+1:]
			break
		}
	}
	fs, f := newFlags(verbOf(args))
	words, err := cli.Words(fs, args)
	if err != nil {
		return err
	}
	if f.it {
		f.interactive, f.tty = true, true
	}
	if f.help || len(words) == 0 {
		fmt.Fprint(out, usage)
		return nil
	}
	c := &client{agent: api.NewClient(f.server, f.controlSocket), manifestDir: f.manifestDir, out: out, errOut: os.Stderr}
	verb, rest := words[0], words[1:]
	isPod := func(w string) bool { return w == "pods" || w == "pod" || w == "po" }
	isNode := func(w string) bool { return w == "node" || w == "nodes" || w == "no" }
	switch {
	case verb == "get" && len(rest) == 1 && isPod(rest[0]):
		return c.getPods(f.output)
	case verb == "get" && len(rest) == 2 && isPod(rest[0]):
		return c.getPod(rest[1], f.output)
	case verb == "get" && len(rest) == 1 && isNode(rest[0]):
		return c.getNode(f.output)
	case verb == "get" && len(rest) == 1 && (rest[0] == "evictions" || rest[0] == "eviction"):
		return c.getEvictions(f.output)
	case verb == "top" && len(rest) == 1 && isPod(rest[0]):
		return c.topPods(f.containers)
	case verb == "top" && len(rest) == 1 && isNode(rest[0]):
		return c.topNode()
	case verb == "cgroups" && len(rest) == 0:
		return c.cgroups(f.output)
	case verb == "describe" && len(rest) == 2 && isPod(rest[0]):
		return c.describePod(rest[1])
	case verb == "describe" && len(rest) >= 1 && isNode(rest[0]):
		return c.describeNode()
	case verb == "events" && len(rest) == 0:
		return c.listEvents(f.podFilter, f.output)
	case verb == "logs" && len(rest) == 1:
		return c.logs(rest[0], logOptions{container: f.container, follow: f.follow, previous: f.previous, tail: f.tail, timestamps: f.timestamps,
			since: f.since, sinceTime: f.sinceTime, limitBytes: f.limitBytes, allContainers: f.allContainers, prefix: f.prefix})
	case verb == "exec" && len(rest) == 1:
		exec := func() (int, error) { return c.exec(rest[0], f.container, command, f.timeout) }
		if f.interactive || f.tty {
			exec = func() (int, error) { return c.execInteractive(rest[0], f.container, command, f.interactive, f.tty) }
		}
		code, err := exec()
		if err != nil {
			return err
		}
		if code != 0 {
			return cli.ExitCode(code)
		}
		return nil
	case verb == "apply" && len(rest) == 0:
		if f.file == "" {
			return cli.UsageError("apply needs -f FILE")
		}
		return c.apply(f.file)
	case verb == "delete" && len(rest) == 2 && isPod(rest[0]):
		var grace *int64
		if f.grace >= 0 {
			grace = &f.grace
		}
		return c.deletePod(rest[1], f.wait, grace)
	}
	return cli.UsageError(fmt.Sprintf("unknown command %q", strings.Join(words, " ")))
}
