// Command nodetest validates a node and experiments on it: the node
// conformance suite against a running agent, and OOM stress experiments
// that start agents of their own. It is kept apart from nodectl, the
// operator's client, because it starts agents and writes cgroups;
// `nodectl conformance` and `nodectl experiment` run it.
//
//	nodetest conformance [--focus RE] [--skip RE] [--parallel N] [--junit FILE] [--json] [--list]
//	nodetest experiment run SCENARIO.yaml [--agent nodeagent|kubelet|earlyoom] [--out DIR] [--repetitions N] [--duration D]
//	nodetest experiment compare DIR... [--out FILE.svg]
//	nodetest peer kubelet --dir DIR [--kubeconfig F] [--node-name N] ...
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"nodeagent/e2e/standin"
	"nodeagent/internal/cli"
)

const usage = `nodetest validates a node running nodeagent and runs OOM stress experiments on it.

Usage:
  nodetest conformance [--focus RE] [--skip RE] [--parallel N] [--junit FILE] [--json] [--list] [--image REF]
                       [--agent-bin PATH] [--launch [--dir DIR] [--port N] [--runtime-endpoint URL]]
                                          run the node conformance suite against the agent (on the node:
                                          it writes manifests into the agent's staticPodPath); the
                                          [Serial] eviction cases run last, on an agent binary they start
                                          with settings sized from the node's free memory. --launch runs
                                          the suite on an agent it starts itself (in DIR, default
                                          bin/conformance, on port N, default 10355) and stops it after
  nodetest experiment run SCENARIO.yaml [--agent nodeagent|kubelet|earlyoom] [--out DIR] [--repetitions N]
                       [--duration D] [--agent-bin PATH] [--runtime-endpoint URL] [--image REF]
                       [--kubelet-bin PATH] [--runtime-bin DIR] [--controlplane-bin PATH] [--earlyoom-bin PATH]
                                          run an OOM stress experiment: starts its own agent with the
                                          scenario's settings; writes timeline.json, summary.json,
                                          report.md, memory.svg. --agent kubelet runs the real kubelet
                                          (make kubelet) on a containerd of its own, joined to a control
                                          plane of its own; --agent earlyoom runs the pods on nodeagent
                                          with its memory eviction off and earlyoom acting at the same
                                          margin. A scenario an agent cannot run says so in its report
  nodetest experiment compare DIR... [--out FILE.svg]
                                          experiments' results side by side, and a plot of the first run
                                          of each (default compare.svg)
  nodetest peer kubelet --dir DIR [--kubeconfig FILE] [--node-name NAME] [--address IP] [--port N]
                       [--read-only-port N] [--healthz-port N] [--root-dir DIR] [--pod-logs-dir DIR]
                       [--node-ip IP] [--cgroup-root PATH] [--kubelet-config FILE] [--kubelet-bin PATH] [--runtime-bin DIR]
                       [--unit FILE [--unit-config FILE]]
                                          run the real kubelet on a containerd of its own in the
                                          foreground (scripts' control runs); prints its CRI endpoint;
                                          SIGTERM or Ctrl-C stops both and restores the host's sysctls,
                                          cgroups, mounts and paths. --unit runs the kubelet as the
                                          systemctl stand-in's unit FILE (written here), which the
                                          upstream serial suite restarts on --unit-config; the kubelet's
                                          exits then leave the containerd up

Global flags:
  --server URL           the agent's read-only API (default http://127.0.0.1:10255, or $NODEAGENT_SERVER)
  --control-socket PATH  the agent's root-only control socket (default /run/nodeagent/nodeagent.sock, or
                         $NODEAGENT_CONTROL_SOCKET)

--runtime-endpoint defaults to $CRI_ENDPOINT, else to the running agent's
containerRuntimeEndpoint (asked over the control socket), else to
unix:///run/containerd/containerd.sock. An experiment checks the runtime answers before
its first run, and exits non-zero when a run fails or a verdict does.

nodectl conformance and nodectl experiment run this command with the same arguments.
`

func main() {
	// Under the names of the tools the upstream suite runs, the stand-ins.
	switch filepath.Base(os.Args[0]) {
	case "systemctl":
		os.Exit(systemctl(os.Args[1:]))
	case "sudo":
		cli.Exit("sudo", standin.Sudo(os.Args[1:]))
	}
	cli.Exit("nodetest", run(os.Args[1:], os.Stdout))
}

// systemctl is the stand-in systemctl, on the unit $NODETEST_UNIT names.
func systemctl(args []string) int {
	u, err := standin.LoadUnit(os.Getenv(standin.EnvUnit))
	if err == nil {
		err = standin.Systemctl(u, args, os.Stdout)
	}
	var exit *standin.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exit):
		if exit.Msg != "" {
			fmt.Fprintln(os.Stderr, exit.Msg)
		}
		return exit.Code
	}
	fmt.Fprintln(os.Stderr, "systemctl:", err)
	return 1
}

// tester is where results go and which agent the suite talks to.
type tester struct {
	server, controlSocket string
	out                   io.Writer
}

func run(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("nodetest", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var c conformanceOptions
	var e experimentOptions
	var help bool
	var server, controlSocket string
	cli.AgentFlags(fs, &server, &controlSocket)
	fs.BoolVar(&help, "help", false, "")
	fs.BoolVar(&help, "h", false, "")
	fs.StringVar(&c.focus, "focus", "", "")
	fs.StringVar(&c.skip, "skip", "", "")
	fs.StringVar(&c.junit, "junit", "", "")
	fs.BoolVar(&c.json, "json", false, "")
	fs.BoolVar(&c.list, "list", false, "")
	fs.IntVar(&c.parallel, "parallel", 4, "")
	fs.BoolVar(&c.launch, "launch", false, "")
	fs.StringVar(&c.launchDir, "dir", "bin/conformance", "")
	fs.IntVar(&c.launchPort, "port", 10355, "")
	fs.StringVar(&e.out, "out", "", "")
	fs.StringVar(&e.endpoint, "runtime-endpoint", os.Getenv("CRI_ENDPOINT"), "")
	fs.IntVar(&e.repetitions, "repetitions", 0, "")
	fs.DurationVar(&e.duration, "duration", 0, "")
	fs.StringVar(&e.agent, "agent", "nodeagent", "")
	fs.StringVar(&e.kubeletBin, "kubelet-bin", os.Getenv("KUBELET_BIN"), "")
	fs.StringVar(&e.runtimeBin, "runtime-bin", os.Getenv("RUNTIME_BIN"), "")
	fs.StringVar(&e.controlplaneBin, "controlplane-bin", os.Getenv("CONTROLPLANE_BIN"), "")
	fs.StringVar(&e.earlyoomBin, "earlyoom-bin", "", "")
	var p peerOptions
	fs.StringVar(&p.kubeconfig, "kubeconfig", "", "")
	fs.StringVar(&p.node, "node-name", "", "")
	fs.StringVar(&p.address, "address", "", "")
	fs.IntVar(&p.readOnlyPort, "read-only-port", 0, "")
	fs.IntVar(&p.healthzPort, "healthz-port", 0, "")
	fs.StringVar(&p.rootDir, "root-dir", "", "")
	fs.StringVar(&p.podLogsDir, "pod-logs-dir", "", "")
	fs.StringVar(&p.nodeIP, "node-ip", "", "")
	fs.StringVar(&p.configFile, "kubelet-config", "", "")
	fs.StringVar(&p.cgroupRoot, "cgroup-root", "", "")
	fs.StringVar(&p.unit, "unit", "", "")
	fs.StringVar(&p.unitConfig, "unit-config", "", "")
	var image, agentBin string
	fs.StringVar(&image, "image", "127.0.0.1:5050/nodeagent/test:latest", "")
	fs.StringVar(&agentBin, "agent-bin", "", "")
	words, err := cli.Words(fs, args)
	if err != nil {
		return err
	}
	if help || len(words) == 0 {
		fmt.Fprint(out, usage)
		return nil
	}
	c.image, c.agentBin, e.image, e.agentBin = image, agentBin, image, agentBin
	t := &tester{server: strings.TrimRight(server, "/"), controlSocket: controlSocket, out: out}
	if e.endpoint == "" {
		e.endpoint = t.runtimeEndpoint()
	}
	c.endpoint = e.endpoint
	switch verb, rest := words[0], words[1:]; {
	case verb == "conformance" && len(rest) == 0:
		return t.runConformance(c)
	case verb == "experiment" && len(rest) == 2 && rest[0] == "run":
		return t.runExperiment(rest[1], e)
	case verb == "experiment" && len(rest) >= 3 && rest[0] == "compare":
		return t.compareExperiments(rest[1:], e.out)
	case verb == "peer" && len(rest) == 1 && rest[0] == "kubelet":
		// --dir and --port are the conformance launcher's too, with its
		// defaults: the peer takes them only when given.
		fs.Visit(func(f *flag.Flag) {
			switch f.Name {
			case "dir":
				p.dir = c.launchDir
			case "port":
				p.port = c.launchPort
			}
		})
		return t.runKubeletPeer(p, e)
	}
	return cli.UsageError(fmt.Sprintf("unknown command %q", strings.Join(words, " ")))
}
