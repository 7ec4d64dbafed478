package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	"golang.org/x/term"

	"nodeagent/e2e/conformance"
	"nodeagent/e2e/launch"
	"nodeagent/internal/cli"
)

// conformanceOptions are nodetest conformance's flags.
type conformanceOptions struct {
	focus, skip, junit, image, agentBin string
	json, list                          bool
	parallel                            int
	// launch starts an agent of its own for the run (make conformance).
	launch              bool
	launchDir, endpoint string
	launchPort          int
}

// runConformance runs the node conformance suite against the agent at
// t.server and exits non-zero when a case failed.
func (t *tester) runConformance(o conformanceOptions) error {
	var opts conformance.Options
	for _, re := range []struct {
		flag, expr string
		into       **regexp.Regexp
	}{{"--focus", o.focus, &opts.Focus}, {"--skip", o.skip, &opts.Skip}} {
		if re.expr == "" {
			continue
		}
		r, err := regexp.Compile(re.expr)
		if err != nil {
			return cli.UsageError(fmt.Sprintf("%s %q: %v", re.flag, re.expr, err))
		}
		*re.into = r
	}
	if o.parallel < 1 {
		return cli.UsageError(fmt.Sprintf("--parallel %d: want 1 or more", o.parallel))
	}
	opts.Parallel = o.parallel
	cases := conformance.Cases()
	if o.list {
		for _, cs := range cases {
			if (opts.Focus == nil || opts.Focus.MatchString(cs.Name)) && (opts.Skip == nil || !opts.Skip.MatchString(cs.Name)) {
				fmt.Fprintln(t.out, cs.Name)
			}
		}
		return nil
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if o.launch {
		a, err := t.launchAgent(ctx, o)
		if err != nil {
			return err
		}
		defer func() {
			a.Stop(30 * time.Second)
			if err := a.RemoveMounts(); err != nil {
				fmt.Fprintf(os.Stderr, "conformance: %v\n", err)
			}
		}()
	}
	node, err := conformance.Connect(ctx, t.server, t.controlSocket, o.image)
	if err != nil {
		return err
	}
	// The eviction cases start this binary beside the agent under test;
	// without one they fail and say so.
	node.AgentBin, _ = agentBinary(o.agentBin)
	// Progress goes to stderr: a live line on a terminal, a line per case
	// otherwise (CI logs).
	tty := term.IsTerminal(int(os.Stderr.Fd()))
	started := time.Now()
	opts.Progress = func(done, total int, r *conformance.Result, running []string) {
		elapsed := time.Since(started).Round(time.Second)
		if r != nil {
			if tty {
				fmt.Fprint(os.Stderr, "\r\033[K")
			}
			fmt.Fprintf(os.Stderr, "[%d/%d %s] %-7s %5.1fs  %s\n", done, total, elapsed, r.Status, r.Duration.Seconds(), r.Name)
		}
		if tty && len(running) > 0 {
			line := fmt.Sprintf("[%d/%d %s] running %d: %s", done, total, elapsed, len(running), strings.Join(running, " | "))
			if w, _, err := term.GetSize(int(os.Stderr.Fd())); err == nil && len(line) > w-1 {
				line = line[:max(w-1, 0)]
			}
			fmt.Fprint(os.Stderr, "\r\033[K"+line)
		}
	}
	fmt.Fprintf(os.Stderr, "conformance: node %s at %s, manifests in %s, image %s, %d at a time\n", node.Name, node.API, node.Manifests, node.Image, opts.Parallel)
	results := conformance.Run(ctx, node, cases, opts)
	if tty {
		fmt.Fprint(os.Stderr, "\r\033[K")
	}
	if o.json {
		if err := conformance.WriteJSON(t.out, results); err != nil {
			return err
		}
	} else {
		conformance.WriteTable(t.out, results)
	}
	if o.junit != "" {
		f, err := os.Create(o.junit)
		if err != nil {
			return err
		}
		if err := conformance.WriteJUnit(f, results, started); err != nil {
			f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
	}
	n := conformance.Counts(results)
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("interrupted: the cases that ran cleaned up after themselves")
	case n[conformance.Failed] > 0:
		return cli.ExitCode(1)
	}
	return nil
}

// launchAgent starts an agent for the suite: its own directory, cgroup
// root and port on this node, so it runs beside a live agent. The suite
// then talks to it.
func (t *tester) launchAgent(ctx context.Context, o conformanceOptions) (*launch.Agent, error) {
	bin, err := agentBinary(o.agentBin)
	if err != nil {
		return nil, err
	}
	dir, err := filepath.Abs(o.launchDir)
	if err != nil {
		return nil, err
	}
	// Manifests an interrupted run left behind would start pods the suite
	// no longer knows of.
	stale, _ := filepath.Glob(filepath.Join(dir, "manifests", "conformance-*.yaml"))
	for _, f := range stale {
		os.Remove(f)
	}
	a, err := launch.New(launch.Options{Bin: bin, RuntimeEndpoint: o.endpoint, Dir: dir, NodeName: "conformance",
		CgroupRoot: "/nodeagent-conformance", Port: o.launchPort, LogLevel: "info"})
	if err != nil {
		return nil, err
	}
	if err := a.Start(ctx, 60*time.Second); err != nil {
		return nil, err
	}
	fmt.Fprintf(os.Stderr, "conformance: agent up on %s (log %s)\n", a.URL(""), a.LogPath())
	t.server, t.controlSocket = a.URL(""), a.ControlSocket
	return a, nil
}
