package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"regexp"
	"strings"
	"syscall"
	"time"

	"golang.org/x/term"

	"nodeagent/e2e/conformance"
	"nodeagent/internal/cli"
)

// conformanceOptions are nodetest conformance's flags.
type conformanceOptions struct {
	focus, skip, junit, image, agentBin string
	json, list                          bool
	parallel                            int
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
