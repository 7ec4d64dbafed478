// Command nodectl is the command-line client of a nodeagent, spelled as
// kubectl is: it reads the agent's local API (pods, node, events, cgroups,
// evictions), prints it as kubectl prints (tables, -o json|yaml|name|
// jsonpath|go-template|custom-columns), follows logs, runs commands in
// containers, and manages manifests in the agent's static pod directory.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"nodeagent/api"
	"nodeagent/internal/cli"
	"nodeagent/internal/control"
)

func main() { cli.Exit("nodectl", run(os.Args[1:], os.Stdout, os.Stderr)) }

// globals are the flags every command takes.
type globals struct {
	server, controlSocket, manifestDir string
}

func (g *globals) client(out, errOut io.Writer) *client {
	return &client{agent: api.NewClient(g.server, g.controlSocket), manifestDir: g.manifestDir, out: out, errOut: errOut}
}

func run(args []string, out, errOut io.Writer) error {
	// The suites that start agents and write cgroups live in nodetest,
	// which takes nodectl's arguments as they are.
	if len(args) > 0 && (args[0] == "conformance" || args[0] == "experiment") {
		return runNodetest(args[0], args)
	}
	root := newRootCommand(out, errOut)
	root.SetArgs(args)
	return root.Execute()
}

func newRootCommand(out, errOut io.Writer) *cobra.Command {
	g := &globals{}
	root := &cobra.Command{
		Use:   "nodectl",
		Short: "nodectl talks to a nodeagent's local API and manages its static pod manifests",
		Long: `nodectl talks to a nodeagent's local API and manages its static pod manifests.

Its commands and flags are kubectl's where kubectl has them (get, describe, logs, exec,
apply, delete, top, events, version), and read what the agent on this node says.
What the read-only API says is shown, never acted on: nodectl derives no path from it.
Whatever nodectl does as root (write a manifest, read a log file, reach the runtime)
goes through the agent's root-only control socket, or flags the operator gave.

NAME is the pod name as listed (with the node suffix) or as written in its manifest.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		// conformance and experiment are nodetest's (see run); listed here
		// for help and completion only.
	}
	root.SetOut(out)
	root.SetErr(errOut)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return cli.UsageError(err.Error()) })
	pf := root.PersistentFlags()
	pf.StringVar(&g.server, "server", cli.EnvOr("NODEAGENT_SERVER", "http://127.0.0.1:10255"),
		"the agent's read-only API ($NODEAGENT_SERVER)")
	pf.StringVar(&g.controlSocket, "control-socket", cli.EnvOr("NODEAGENT_CONTROL_SOCKET", control.DefaultSocket),
		"the agent's root-only control socket ($NODEAGENT_CONTROL_SOCKET): apply, delete, logs and exec act through it, and only if the process behind it runs as root")
	pf.StringVar(&g.manifestDir, "manifest-dir", "", "apply and delete write or remove DIR/NAME.yaml directly, without the agent")

	newClient := func() *client { return g.client(out, errOut) }
	root.AddCommand(
		newGetCommand(newClient),
		newDescribeCommand(newClient),
		newEventsCommand(newClient),
		newLogsCommand(newClient),
		newExecCommand(newClient),
		newApplyCommand(newClient),
		newDeleteCommand(newClient),
		newTopCommand(newClient),
		newCgroupsCommand(newClient),
		newVersionCommand(newClient),
		suiteCommand("conformance", "Run the node conformance suite against the agent (nodetest conformance; see nodetest conformance --help)"),
		suiteCommand("experiment", "Run or compare OOM stress experiments (nodetest experiment; see nodetest experiment --help)"),
	)
	// Unknown words are errors, not help.
	root.Args = cobra.NoArgs
	root.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
	for _, c := range root.Commands() {
		c.SetFlagErrorFunc(root.FlagErrorFunc())
	}
	return root
}

// suiteCommand is a help and completion entry for a nodetest suite; run
// hands the arguments to nodetest before cobra sees them.
func suiteCommand(name, short string) *cobra.Command {
	return &cobra.Command{Use: name + " [FLAGS]", Short: short, DisableFlagParsing: true,
		RunE: func(_ *cobra.Command, args []string) error { return runNodetest(name, append([]string{name}, args...)) }}
}

// watchContext ends a watch: on Ctrl-C or SIGTERM (tests end it sooner).
var watchContext = func() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

// pollEverySecond runs f every second until the watch ends or f fails:
// the read-only API has no watch, so -w polls it.
func pollEverySecond(f func() error) error {
	ctx, stop := watchContext()
	defer stop()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		if err := f(); err != nil {
			return err
		}
	}
}

// resourceArgs checks "TYPE [NAME]" words for a command whose types are
// given, and returns the canonical type.
func resourceArgs(args []string, types map[string][]string, maxNames int) (string, []string, error) {
	if len(args) == 0 {
		var names []string
		for t := range types {
			names = append(names, t)
		}
		return "", nil, cli.UsageError("a resource type is required: " + strings.Join(sortedStrings(names), ", "))
	}
	for canonical, aliases := range types {
		for _, a := range append([]string{canonical}, aliases...) {
			if strings.EqualFold(args[0], a) {
				if len(args)-1 > maxNames {
					return "", nil, cli.UsageError(fmt.Sprintf("%s takes at most %d name(s), got %q", canonical, maxNames, args[1:]))
				}
				return canonical, args[1:], nil
			}
		}
	}
	return "", nil, cli.UsageError(fmt.Sprintf("the server doesn't have a resource type %q", args[0]))
}

// mustFlag ignores the errors of registering flag completions: they fail
// only for a flag that does not exist, a programming error tests catch.
func mustFlag(err error) {
	if err != nil {
		panic(err)
	}
}
