package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"nodeagent/e2e/experiment"
)

// experimentOptions are nodetest experiment's flags.
type experimentOptions struct {
	out, agentBin, endpoint, image string
	repetitions                    int
	duration                       time.Duration
	// agent is nodeagent, kubelet or earlyoom; the binaries are the
	// peers'.
	agent, kubeletBin, runtimeBin, controlplaneBin, earlyoomBin string
}

// runExperiment runs a scenario file and writes its results.
func (t *tester) runExperiment(file string, o experimentOptions) error {
	nodeMemory, _, err := experiment.NodeMemory()
	if err != nil {
		return err
	}
	s, err := experiment.Load(file, nodeMemory)
	if err != nil {
		return err
	}
	if o.repetitions > 0 {
		s.Repetitions = o.repetitions
	}
	if o.duration > 0 {
		s.Duration.Duration = o.duration
		if err := s.Validate(nodeMemory); err != nil {
			return fmt.Errorf("with --duration %s: %w", o.duration, err)
		}
	}
	env := experiment.Env{RuntimeEndpoint: o.endpoint, Image: o.image, Agent: o.agent,
		Registry: envOr("REGISTRY", "127.0.0.1:5050"), PauseImage: envOr("PAUSE_IMAGE", "127.0.0.1:5050/nodeagent/pause:1.0")}
	if env.AgentBin, err = agentBinary(o.agentBin); err != nil {
		return err
	}
	if err := o.peerBinaries(&env, s.NeedsAPIServer()); err != nil {
		return err
	}
	out := o.out
	if out == "" {
		out = filepath.Join("results", s.Name+"-"+o.agent+"-"+time.Now().Format("20060102-150405"))
	}
	if fileExists(filepath.Join(out, "summary.json")) {
		return fmt.Errorf("%s already holds an experiment's results: choose another --out, or remove it", out)
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("experiments start an agent that writes cgroups and talks to the runtime: run nodetest experiment as root")
	}
	if err := checkRuntime(o.endpoint); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	fmt.Fprintf(os.Stderr, "experiment %s: %d run(s) of %s, %d pods each, sampled at %d Hz; results in %s\n",
		s.Name, s.Repetitions, s.Duration.Duration, s.PodCount(), s.SampleHz, out)
	lastLine := time.Time{}
	progress := func(run, runs int, elapsed, duration time.Duration, last experiment.Sample) {
		if time.Since(lastLine) < time.Second {
			return
		}
		lastLine = time.Now()
		fmt.Fprintf(os.Stderr, "run %d of %d: %4.1fs of %s, pods working set %d Mi, node available %d Mi, PSI some avg10 %.1f%%, kernel OOM kills %d\n",
			run, runs, elapsed.Seconds(), duration, last.PodsWorkingSet>>20, last.NodeAvailable>>20, last.PSISomeAvg10, last.KernelOOMKills)
	}
	_, runErr := experiment.Execute(ctx, s, env, out, nodeMemory, progress)
	sum, err := experiment.ReadSummary(out)
	if err != nil {
		return errors.Join(runErr, err)
	}
	if sum.NotApplicable != "" {
		fmt.Fprintf(t.out, "experiment %s does not apply to %s: %s\nreport: %s\n", s.Name, o.agent, sum.NotApplicable, filepath.Join(out, "report.md"))
		return nil
	}
	for _, v := range sum.Verdicts {
		fmt.Fprintf(t.out, "%s  %s (%s)\n", map[bool]string{true: "PASS", false: "FAIL"}[v.Pass], v.Check, v.Detail)
	}
	fmt.Fprintf(t.out, "report: %s\n", filepath.Join(out, "report.md"))
	if runErr != nil {
		return runErr
	}
	if failed := sum.Failed(); len(failed) > 0 {
		return fmt.Errorf("experiment %s: %d of %d verdicts failed", s.Name, len(failed), len(sum.Verdicts))
	}
	return nil
}

// compareExperiments prints result directories side by side and writes
// the plot of their first runs to svg (default compare.svg).
func (t *tester) compareExperiments(dirs []string, svg string) error {
	var sums []*experiment.Summary
	var names []string
	for _, d := range dirs {
		s, err := experiment.ReadResult(d)
		if err != nil {
			return err
		}
		sums, names = append(sums, s), append(names, filepath.Base(filepath.Clean(d)))
	}
	if err := experiment.Compare(t.out, names, sums); err != nil {
		return err
	}
	plot, err := experiment.ComparePlot(names, dirs)
	if err != nil {
		fmt.Fprintf(t.out, "no plot: %v\n", err)
		return nil
	}
	if svg == "" {
		svg = "compare.svg"
	}
	if err := os.WriteFile(svg, []byte(plot), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(t.out, "plot: %s\n", svg)
	return nil
}

// peerBinaries checks and fills what --agent kubelet or earlyoom needs,
// and the control plane nodeagent joins for a scenario that resizes pods
// (api): each flag's value, else what sits beside nodetest in bin/ (the
// kubelet in bin/upstream, the runtime in bin/runtime, the control
// plane), else PATH for earlyoom.
func (o experimentOptions) peerBinaries(env *experiment.Env, api bool) error {
	switch o.agent {
	case "nodeagent":
		if !api {
			return nil
		}
		if env.ControlplaneBin = besideNodetest(o.controlplaneBin, "controlplane"); env.ControlplaneBin == "" || !fileExists(env.ControlplaneBin) {
			return fmt.Errorf("the scenario resizes pods, which runs nodeagent joined to a control plane: --controlplane-bin %q not found (make controlplane builds it)", env.ControlplaneBin)
		}
		return nil
	case "kubelet":
		env.KubeletBin, env.RuntimeBin, env.ControlplaneBin = besideNodetest(o.kubeletBin, "upstream/kubelet"),
			besideNodetest(o.runtimeBin, "runtime"), besideNodetest(o.controlplaneBin, "controlplane")
		for _, b := range []struct{ flag, path, how string }{{"--kubelet-bin", env.KubeletBin, "make kubelet"},
			{"--runtime-bin", env.RuntimeBin, "make runtime-up"}, {"--controlplane-bin", env.ControlplaneBin, "make controlplane"}} {
			if b.path == "" || !fileExists(b.path) {
				return fmt.Errorf("--agent kubelet: %s %q not found (%s builds it)", b.flag, b.path, b.how)
			}
		}
		return nil
	case "earlyoom":
		env.EarlyoomBin = o.earlyoomBin
		if env.EarlyoomBin == "" {
			p, err := exec.LookPath("earlyoom")
			if err != nil {
				return fmt.Errorf("--agent earlyoom: no earlyoom on PATH (install the Debian package earlyoom, or make deps) and no --earlyoom-bin")
			}
			env.EarlyoomBin = p
		}
		return nil
	}
	return fmt.Errorf("--agent %q: one of %v", o.agent, experiment.Agents)
}

// besideNodetest is flag's value, else rel in nodetest's directory (bin/),
// else "".
func besideNodetest(flag, rel string) string {
	if flag != "" {
		return flag
	}
	if self, err := os.Executable(); err == nil {
		if p := filepath.Join(filepath.Dir(self), rel); fileExists(p) {
			return p
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

// agentBinary is the nodeagent binary experiments start: the flag's, the
// one beside nodetest, or the one on PATH.
func agentBinary(flag string) (string, error) {
	if flag != "" {
		return flag, nil
	}
	if self, err := os.Executable(); err == nil {
		if candidate := filepath.Join(filepath.Dir(self), "nodeagent"); fileExists(candidate) {
			return candidate, nil
		}
	}
	if path, err := exec.LookPath("nodeagent"); err == nil {
		return path, nil
	}
	return "", fmt.Errorf("no nodeagent binary beside nodetest or on PATH: set --agent-bin")
}

func fileExists(path string) bool { _, err := os.Stat(path); return err == nil }
