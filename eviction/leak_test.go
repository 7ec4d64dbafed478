package eviction

import (
	"testing"

	"go.uber.org/goleak"

	"nodeagent/internal/testhog"
)

// The live tests re-run this binary as a memory hog (testhog.Main). Every
// goroutine the package starts ends with its context or its owner.
func TestMain(m *testing.M) {
	testhog.Main()
	goleak.VerifyTestMain(m)
}
