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

func TestEveryOrWokenStepsWhenWokenBeforeTheTick(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(0, 0))
	ctx, cancel := context.WithCancel(context.Background())
	steps := make(chan struct{}, 10)
	wake := make(chan struct{})
	done := make(chan struct{})
	go func() {
		EveryOrWoken(ctx, clk, time.Hour, wake, func(context.Context) { steps <- struct{}{} })
		close(done)
	}()
	wake <- struct{}{}
	select {
	case <-steps:
	case <-time.After(10 * time.Second):
		t.Fatal("no step after a wake, with the tick an hour away")
	}
	cancel()
	<-done
	if len(steps) != 0 {
		t.Fatalf("%d steps more than the one woken", len(steps))
	}
}
