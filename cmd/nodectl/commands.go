package main

import (
	"fmt"
	"runtime/debug"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"

	"nodeagent/internal/cli"
	"nodeagent/internal/version"
)

var describeTypes = map[string][]string{"pods": {"pod", "po"}, "node": {"nodes", "no"}}

func newDescribeCommand(newClient func() *client) *cobra.Command {
	var selector string
	cmd := &cobra.Command{
		Use:   "describe (pods [NAME...] | node) [-l SELECTOR]",
		Short: "Show details of pods or the node: status, cgroup, containers, probes, volumes, events",
		Example: `  # One pod, every pod, or those with a label
  nodectl describe pod web
  nodectl describe pods
  nodectl describe pods -l app=web

  # The node: capacity, allocatable, conditions, cgroups
  nodectl describe node`,
		Args:              cobra.MinimumNArgs(1),
		ValidArgsFunction: completeTypeThenPods(newClient, describeTypes),
		RunE: func(cmd *cobra.Command, args []string) error {
			kind, names, err := resourceArgs(args, describeTypes, 100)
			if err != nil {
				return err
			}
			sel, err := parseSelector(selector)
			if err != nil {
				return err
			}
			c := newClient()
			if kind == "node" {
				return c.describeNode()
			}
			pods, err := c.selectPods(names, sel)
			if err != nil {
				return err
			}
			if len(pods) == 0 {
				fmt.Fprintln(c.errOut, "No resources found.")
				return nil
			}
			shared, err := c.describeShared()
			if err != nil {
				return err
			}
			for i := range pods {
				if i > 0 {
					fmt.Fprintln(c.out)
				}
				if err := c.describePod(&pods[i], shared); err != nil {
					return err
				}
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&selector, "selector", "l", "", "label selector, e.g. -l app=web")
	return cmd
}

func newEventsCommand(newClient func() *client) *cobra.Command {
	var output, forObject, pod string
	var watch bool
	cmd := &cobra.Command{
		Use:   "events [--for pod/NAME] [-o json|yaml] [-w]",
		Short: "List the agent's events: pulls, starts, kills, back-offs, OOM kills, evictions",
		Example: `  # Every event, then those of one pod, then new ones as they come
  nodectl events
  nodectl events --for pod/web
  nodectl events -w`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if _, err := parseOutput(output, "json", "yaml"); err != nil {
				return err
			}
			if forObject != "" {
				kind, name, ok := strings.Cut(forObject, "/")
				if !ok || !strings.EqualFold(kind, "pod") && !strings.EqualFold(kind, "pods") || name == "" {
					return cli.UsageError(fmt.Sprintf("--for %q: want pod/NAME", forObject))
				}
				if pod != "" && pod != name {
					return cli.UsageError("--for and --pod name different pods")
				}
				pod = name
			}
			return newClient().listEvents(pod, output, watch)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: json or yaml")
	cmd.Flags().StringVar(&forObject, "for", "", "only the events of this object, as pod/NAME")
	cmd.Flags().StringVar(&pod, "pod", "", "only the events of this pod (the same as --for pod/NAME)")
	cmd.Flags().BoolVarP(&watch, "watch", "w", false, "after listing, print new events as they come")
	mustFlag(cmd.RegisterFlagCompletionFunc("pod", completePods(newClient)))
	return cmd
}

func newLogsCommand(newClient func() *client) *cobra.Command {
	o := logOptions{}
	cmd := &cobra.Command{
		Use:   "logs POD [-c CONTAINER | --all-containers] [-f] [flags]",
		Short: "Print a container's log, read with the kubelet's own reader",
		Long: `Print a container's log from the CRI log file the runtime writes, read with the kubelet's
own reader (k8s.io/cri-client/pkg/logs): -f follows across log rotation. Without -c, the
pod's default container (its kubectl.kubernetes.io/default-container annotation, else the
first) is read.`,
		Example: `  # The last 20 lines, then follow
  nodectl logs web --tail 20 -f

  # The previous run of container app, with timestamps
  nodectl logs web -c app --previous --timestamps

  # The last 10 minutes of every container, each line prefixed
  nodectl logs web --all-containers --prefix --since 10m`,
		Args:              exactArgs(1, "logs needs one pod name"),
		ValidArgsFunction: completePods(newClient),
		RunE: func(cmd *cobra.Command, args []string) error {
			// Options are checked before the agent is asked anything.
			if _, err := o.podLogOptions(); err != nil {
				return err
			}
			return newClient().logs(args[0], o)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.container, "container", "c", "", "the container (default: the pod's default container)")
	f.BoolVar(&o.allContainers, "all-containers", false, "every container of the pod, init containers first")
	f.BoolVar(&o.prefix, "prefix", false, "prefix each line with [pod/NAME/CONTAINER]")
	f.BoolVarP(&o.follow, "follow", "f", false, "follow the log, across rotation, until the container stops")
	f.BoolVarP(&o.previous, "previous", "p", false, "the previous run of the container")
	f.Int64Var(&o.tail, "tail", -1, "the last N lines (-1: all)")
	f.BoolVar(&o.timestamps, "timestamps", false, "start each line with its RFC 3339 time")
	f.DurationVar(&o.since, "since", 0, "only lines newer than this duration, e.g. 5s, 2m, 3h")
	f.StringVar(&o.sinceTime, "since-time", "", "only lines after this RFC 3339 time")
	f.Int64Var(&o.limitBytes, "limit-bytes", 0, "stop after this many bytes (0: no limit)")
	mustFlag(cmd.RegisterFlagCompletionFunc("container", completeContainers(newClient)))
	return cmd
}

func newExecCommand(newClient func() *client) *cobra.Command {
	var container string
	var stdin, tty bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "exec POD [-c CONTAINER] [-i] [-t] -- COMMAND [ARGS...]",
		Short: "Run a command in a container and exit with its code",
		Example: `  # A command's output and exit code
  nodectl exec web -- cat /etc/hostname

  # An interactive shell
  nodectl exec -it web -- sh`,
		ValidArgsFunction: completePods(newClient),
		RunE: func(cmd *cobra.Command, args []string) error {
			dash := cmd.ArgsLenAtDash()
			if dash < 0 {
				return cli.UsageError("exec needs -- before the command: nodectl exec POD -- COMMAND")
			}
			if dash != 1 {
				return cli.UsageError(fmt.Sprintf("exec needs one pod name before --, got %q", args[:dash]))
			}
			if len(args) == 1 {
				return cli.UsageError("exec needs a command after --")
			}
			if timeout != 0 && (stdin || tty) {
				return cli.UsageError("--timeout applies to a command run without -i or -t")
			}
			c := newClient()
			pod, command := args[0], args[1:]
			var code int
			var err error
			if stdin || tty {
				code, err = c.execInteractive(pod, container, command, stdin, tty)
			} else {
				code, err = c.exec(pod, container, command, timeout)
			}
			if err != nil {
				return err
			}
			if code != 0 {
				return cli.ExitCode(code)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&container, "container", "c", "", "the container (default: the pod's default container)")
	f.BoolVarP(&stdin, "stdin", "i", false, "pass stdin to the command")
	f.BoolVarP(&tty, "tty", "t", false, "give the command a terminal")
	f.DurationVar(&timeout, "timeout", 0, "stop the command after this long (without -i or -t; 0: no limit)")
	mustFlag(cmd.RegisterFlagCompletionFunc("container", completeContainers(newClient)))
	return cmd
}

func newApplyCommand(newClient func() *client) *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:   "apply -f FILE",
		Short: "Validate a Pod manifest; the agent writes it into its manifest directory",
		Example: `  nodectl apply -f web.yaml
  nodectl apply -f web.yaml --manifest-dir /etc/nodeagent/manifests   # without the agent`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if file == "" {
				return cli.UsageError("apply needs -f FILE")
			}
			return newClient().apply(file)
		},
	}
	cmd.Flags().StringVarP(&file, "filename", "f", "", "the Pod manifest (YAML or JSON)")
	mustFlag(cmd.MarkFlagFilename("filename", "yaml", "yml", "json"))
	return cmd
}

func newDeleteCommand(newClient func() *client) *cobra.Command {
	var grace int64
	var wait bool
	cmd := &cobra.Command{
		Use:   "delete pod NAME [--grace-period N] [--wait]",
		Short: "Remove a pod's manifest; the agent stops the pod",
		Example: `  # Stop at once, and wait until nothing of it is left
  nodectl delete pod web --grace-period 0 --wait`,
		ValidArgsFunction: completeTypeThenPods(newClient, map[string][]string{"pod": {"pods", "po"}}),
		RunE: func(cmd *cobra.Command, args []string) error {
			kind, names, err := resourceArgs(args, map[string][]string{"pod": {"pods", "po"}}, 1)
			if err != nil {
				return err
			}
			if len(names) != 1 {
				return cli.UsageError(kind + " needs a name: nodectl delete pod NAME")
			}
			var g *int64
			if cmd.Flags().Changed("grace-period") {
				if grace < 0 {
					return cli.UsageError(fmt.Sprintf("--grace-period %d: must be 0 or more", grace))
				}
				g = &grace
			}
			return newClient().deletePod(names[0], wait, g)
		},
	}
	cmd.Flags().Int64Var(&grace, "grace-period", -1, "seconds the pod gets to stop, overriding its own (0: kill at once)")
	cmd.Flags().BoolVar(&wait, "wait", false, "wait until the pod is gone")
	return cmd
}

func newTopCommand(newClient func() *client) *cobra.Command {
	var containers bool
	types := map[string][]string{"pods": {"pod", "po"}, "node": {"nodes", "no"}}
	cmd := &cobra.Command{
		Use:       "top (pods [--containers] | node)",
		Short:     "CPU (millicores) and memory working set of the pods or the node, from /stats/summary",
		Args:      cobra.ExactArgs(1),
		ValidArgs: []string{"pods", "node"},
		RunE: func(cmd *cobra.Command, args []string) error {
			kind, _, err := resourceArgs(args, types, 0)
			if err != nil {
				return err
			}
			if kind == "node" {
				return newClient().topNode()
			}
			return newClient().topPods(containers)
		},
	}
	cmd.Flags().BoolVar(&containers, "containers", false, "each container's use")
	return cmd
}

func newCgroupsCommand(newClient func() *client) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "cgroups [-o json|yaml]",
		Short: "The QoS cgroup tree: CPU shares and quota, memory limit and use, pids",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if _, err := parseOutput(output, "json", "yaml"); err != nil {
				return err
			}
			return newClient().cgroups(output)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: json or yaml")
	return cmd
}

func newVersionCommand(newClient func() *client) *cobra.Command {
	var clientOnly bool
	cmd := &cobra.Command{
		Use:   "version [--client]",
		Short: "Print nodectl's version and the agent's",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c := newClient()
			fmt.Fprintf(c.out, "Client Version: %s\n", clientVersion())
			if clientOnly {
				return nil
			}
			var n corev1.Node
			if err := c.fetch("/node", &n); err != nil {
				return fmt.Errorf("agent version: %w", err)
			}
			fmt.Fprintf(c.out, "Agent Version: %s\n", n.Status.NodeInfo.KubeletVersion)
			return nil
		},
	}
	cmd.Flags().BoolVar(&clientOnly, "client", false, "nodectl's version only")
	return cmd
}

// clientVersion is the version make stamps in, else the module version
// go install records ("(devel)" for a plain go build).
func clientVersion() string {
	if version.Version != "dev" {
		return version.Version
	}
	if info, ok := debug.ReadBuildInfo(); ok && info.Main.Version != "" {
		return info.Main.Version
	}
	return version.Version
}

// exactArgs is cobra.ExactArgs with nodectl's words.
func exactArgs(n int, why string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) != n {
			return cli.UsageError(fmt.Sprintf("%s, got %d: %q", why, len(args), args))
		}
		return nil
	}
}
