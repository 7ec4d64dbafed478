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
	env := experiment.Env{RuntimeEndpoint: o.endpoint, Image: o.image}
	if env.AgentBin, err = agentBinary(o.agentBin); err != nil {
		return err
	}
	out := o.out
	if out == "" {
		out = filepath.Join("results", s.Name+"-"+time.Now().Format("20060102-150405"))
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

// compareExperiments prints two result directories side by side.
func (t *tester) compareExperiments(a, b string) error {
	sa, err := experiment.ReadSummary(a)
	if err != nil {
		return err
	}
	sb, err := experiment.ReadSummary(b)
	if err != nil {
		return err
	}
	return experiment.Compare(t.out, a, b, sa, sb)
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
