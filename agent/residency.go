package agent

import (
	"context"
	"time"

	"nodeagent/internal/loop"
	"nodeagent/internal/residency"
)

// Start-up and bursts of pod work touch code and tables the steady loops
// never run again; with the kernel's fault-around they keep about half the
// binary resident (docs/benchmarks.md "Where the RSS goes"). Once pod work
// has been quiet for pageQuiet, those mappings are dropped; the pages stay
// in the page cache and what runs maps its own back.
const (
	pageQuiet = 10 * time.Second
	pageCheck = 5 * time.Second
)

// buildPageRelease prepares the release of the binary's pages, unless
// --release-binary-pages=false; nil when off or when the mappings cannot
// be read.
func (a *Agent) buildPageRelease(p *parts) {
	if a.opts.KeepBinaryPages {
		return
	}
	spans, err := residency.ReadOnlySpans()
	if err != nil || len(spans) == 0 {
		a.log.Warn("the binary's mappings are unreadable; its pages stay mapped", "err", err)
		return
	}
	first := true
	p.pages = residency.NewReleaser(a.opts.Clock, pageQuiet, func() error {
		before := residency.FileResident()
		if err := residency.Release(spans); err != nil {
			return err
		}
		log := a.log.Debug
		if first {
			log, first = a.log.Info, false
		}
		log("released the binary's idle pages; they stay in the page cache",
			"rss_file_before", before, "rss_file_after", residency.FileResident())
		return nil
	})
}

// releasePagesLoop drops the binary's idle mappings after start-up and
// after each burst of pod work.
func (a *Agent) releasePagesLoop(p *parts) func(context.Context) {
	return func(ctx context.Context) {
		loop.Every(ctx, a.opts.Clock, pageCheck, func(context.Context) {
			if _, err := p.pages.Step(); err != nil {
				a.log.Warn("releasing the binary's idle pages", "err", err)
			}
		})
	}
}
