package pleg

import (
	"testing"

	"go.uber.org/goleak"
)

// Every goroutine the package starts ends with its context or its owner.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
