package agent

import (
	"testing"

	"go.uber.org/goleak"
)

// Every goroutine the package starts ends with its context or its owner.
// cadvisor's raw cgroup factory is registered once per process
// (cgroups.NewCadvisor), with its inotify reader: it is not the agent's.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("k8s.io/utils/inotify.(*Watcher).readEvents"))
}
