package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"nodeagent/e2e/bench/benchkit"
	"nodeagent/e2e/experiment"
)

var (
	sideRuns  = flag.Int("side-runs", 20, "runs of each scenario against each agent (0: no side-by-side part)")
	scenarios = flag.String("scenarios", "examples/experiments/besteffort-bomb.yaml,examples/experiments/bomb-under-load.yaml", "the scenarios run against each agent")
	agents    = flag.String("agents", strings.Join(experiment.Agents, ","), "the agents the scenarios run against")
	outDir    = flag.String("out", "bin/bench/eviction", "where the side-by-side results go (a directory per scenario and agent)")
	cpBin     = flag.String("controlplane", os.Getenv("CONTROLPLANE_BIN"), "bin/controlplane: the kubelet side joins a control plane")
	// The kubelet side: the real kubelet on a containerd of its own.
	kubeletBin, runtimeBin = benchkit.PeerFlags()
)

// sideBySide runs each scenario against each agent, the same way, and
// prints them side by side: the kernel's kills, the time from the
// threshold's crossing to the kill and to the pod's status (measured from
// outside), and the peak usage against the pods' memory. An agent that
// cannot start is one line and the others go on.
func sideBySide(ctx context.Context) {
	if *sideRuns <= 0 {
		return
	}
	nodeMemory, _, err := experiment.NodeMemory()
	benchkit.Check(err)
	env := experiment.Env{AgentBin: env.AgentBin, RuntimeEndpoint: env.Endpoint, Image: env.Image,
		KubeletBin: *kubeletBin, RuntimeBin: *runtimeBin, ControlplaneBin: *cpBin,
		Registry: envOr("REGISTRY", "127.0.0.1:5050"), PauseImage: envOr("PAUSE_IMAGE", "127.0.0.1:5050/nodeagent/pause:1.0")}
	if p, err := exec.LookPath("earlyoom"); err == nil {
		env.EarlyoomBin = p
	}
	for _, file := range strings.Split(*scenarios, ",") {
		s, err := experiment.Load(file, nodeMemory)
		benchkit.Check(err)
		s.Repetitions = *sideRuns
		var names, dirs []string
		var sums []*experiment.Summary
		for _, agent := range strings.Split(*agents, ",") {
			if why := missingPeer(env, agent); why != "" {
				fmt.Printf("bench: no %s side: %s\n", agent, why)
				continue
			}
			e := env
			e.Agent = agent
			dir := filepath.Join(*outDir, s.Name+"-"+agent)
			benchkit.Check(os.RemoveAll(dir))
			benchkit.Progress(fmt.Sprintf("%s against %s: %d runs of %s (results in %s)", s.Name, agent, s.Repetitions, s.Duration.Duration, dir))
			if _, err := experiment.Execute(ctx, s, e, dir, nodeMemory, nil); err != nil {
				fmt.Printf("bench: %s against %s: %v\n", s.Name, agent, err)
			}
			sum, err := experiment.ReadResult(dir)
			if err != nil {
				fmt.Printf("bench: %s against %s: %v\n", s.Name, agent, err)
				continue
			}
			names, dirs, sums = append(names, agent), append(dirs, dir), append(sums, sum)
		}
		if len(sums) == 0 {
			continue
		}
		fmt.Printf("\n%s, %d runs per agent, side by side (crossing: the pods' working set past their memory less the hard threshold)\n", s.Name, *sideRuns)
		benchkit.Check(experiment.Compare(os.Stdout, names, sums))
		if plot, err := experiment.ComparePlot(names, dirs); err == nil {
			svg := filepath.Join(*outDir, s.Name+"-compare.svg")
			benchkit.Check(os.WriteFile(svg, []byte(plot), 0o644))
			fmt.Println("plot:", svg)
		}
	}
}

// missingPeer says why agent cannot run here, or "".
func missingPeer(env experiment.Env, agent string) string {
	switch agent {
	case "kubelet":
		for _, b := range []struct{ what, path string }{{"KUBELET_BIN", env.KubeletBin}, {"RUNTIME_BIN", env.RuntimeBin}, {"CONTROLPLANE_BIN", env.ControlplaneBin}} {
			if b.path == "" {
				return b.what + " unset (make bench sets it)"
			}
			if _, err := os.Stat(b.path); err != nil {
				return err.Error()
			}
		}
	case "earlyoom":
		if env.EarlyoomBin == "" {
			return "no earlyoom on PATH (the Debian package; make deps installs it)"
		}
	}
	return ""
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
