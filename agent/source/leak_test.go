package source

import (
	"context"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// Run owns its watcher goroutines and stops them all with its context.
func TestRunLeavesNoGoroutines(t *testing.T) {
	defer goleak.VerifyNone(t)
	ctx, cancel := context.WithCancel(context.Background())
	out := make(chan Update, 1)
	done := make(chan struct{})
	go func() { NewFile(t.TempDir(), "n", time.Hour, quiet()).Run(ctx, out); close(done) }()
	<-out
	cancel()
	<-done
}
