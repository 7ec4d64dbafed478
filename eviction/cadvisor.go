package eviction

import (
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/google/cadvisor/container"
	"github.com/google/cadvisor/container/raw"
	info "github.com/google/cadvisor/info/v1"
	"github.com/google/cadvisor/watcher"
)

// CgroupStats reads pod and container cgroups through cadvisor's raw
// cgroup handler, as the kubelet's stats do: the per-container working
// sets the eviction message names and the process counts the pid signal
// ranks by. The memory signals and the victims' working sets are read
// from the cgroup files directly instead (cgroups.ReadMemoryStats): they
// sit on the decision path, where one cadvisor GetStats (about 200 µs per
// cgroup here, all of memory.stat and the process table) would cost more
// than the whole decision.
type CgroupStats struct{}

var rawFactory struct {
	once sync.Once
	err  error
}

// machineFacts is the little of cadvisor's machine information its raw
// handler asks for; memory and process stats need none of it.
type machineFacts struct{}

func (machineFacts) GetMachineInfo() (*info.MachineInfo, error) { return &info.MachineInfo{}, nil }
func (machineFacts) GetVersionInfo() (*info.VersionInfo, error) { return &info.VersionInfo{}, nil }

// NewCgroupStats registers cadvisor's raw handler for memory and process
// metrics (once per process: cadvisor keeps its factories globally).
func NewCgroupStats() (*CgroupStats, error) {
	rawFactory.once.Do(func() {
		metrics := container.MetricSet{container.MemoryUsageMetrics: struct{}{}, container.ProcessMetrics: struct{}{}}
		rawFactory.err = raw.Register(machineFacts{}, nil, metrics, []string{"/"})
	})
	if rawFactory.err != nil {
		return nil, fmt.Errorf("cadvisor raw cgroup handler: %w", rawFactory.err)
	}
	return &CgroupStats{}, nil
}

// Stats reads one cgroup, named by its path below the hierarchy's root
// ("/kubepods/burstable/pod<uid>/<container id>").
func (*CgroupStats) Stats(name string) (*info.ContainerStats, error) {
	h, accepted, err := container.NewContainerHandler(name, watcher.Raw, nil, true)
	if err != nil {
		return nil, fmt.Errorf("cadvisor handler for %s: %w", name, err)
	}
	if !accepted {
		return nil, fmt.Errorf("cadvisor refused cgroup %s", name)
	}
	defer h.Cleanup()
	if !h.Exists() {
		return nil, fmt.Errorf("cgroup %s: %w", name, os.ErrNotExist)
	}
	return h.GetStats()
}

// containerIDOf reads a container cgroup's directory name: the ID itself
// under the cgroupfs driver, "cri-containerd-<id>.scope" under systemd.
func containerIDOf(dir string) string {
	dir = strings.TrimSuffix(dir, ".scope")
	if i := strings.LastIndexByte(dir, '-'); i >= 0 {
		dir = dir[i+1:]
	}
	return dir
}
