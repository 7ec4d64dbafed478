// Package loop runs a control loop's step function on a ticker, so each
// loop is written as a step plus one call: the step does the work, Every
// owns the timing and the stop.
package loop

import (
	"context"
	"time"

	"k8s.io/utils/clock"
)

// Every calls step every period until ctx is done. It blocks.
func Every(ctx context.Context, clk clock.WithTicker, period time.Duration, step func(context.Context)) {
	EveryOrWoken(ctx, clk, period, nil, step)
}

// EveryOrWoken is Every, and step also runs at once when wake receives (a
// change that should not wait for the next tick).
func EveryOrWoken(ctx context.Context, clk clock.WithTicker, period time.Duration, wake <-chan struct{}, step func(context.Context)) {
	t := clk.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			step(ctx)
		case <-wake:
			step(ctx)
		}
	}
}
