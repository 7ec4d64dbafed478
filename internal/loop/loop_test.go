package loop

import (
	"context"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

func TestEveryStepsOnTicksAndStops(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(0, 0))
	ctx, cancel := context.WithCancel(context.Background())
	steps := make(chan struct{}, 10)
	done := make(chan struct{})
	go func() { Every(ctx, clk, time.Second, func(context.Context) { steps <- struct{}{} }); close(done) }()
	for i := 0; i < 3; i++ {
		for !clk.HasWaiters() {
			time.Sleep(time.Millisecond)
		}
		clk.Step(time.Second)
		<-steps
	}
	cancel()
	<-done
}
