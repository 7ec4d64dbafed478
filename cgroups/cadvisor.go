package cgroups

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"

	"github.com/google/cadvisor/container"
	"github.com/google/cadvisor/container/raw"
	info "github.com/google/cadvisor/info/v1"
	"github.com/google/cadvisor/watcher"
)

// Cadvisor reads cgroups through cadvisor's raw cgroup handler, as the
// kubelet's stats do: CPU, memory and process stats of the node, pod and
// container cgroups. Decision paths (the eviction signals, the victims'
// working sets) read the cgroup files directly instead (ReadMemoryStats):
// one cadvisor GetStats costs about 200 µs per cgroup here (all of
// memory.stat and the process table), more than a whole decision.
type Cadvisor struct{}

var rawFactory struct {
	once sync.Once
	err  error
}

// machineFacts is the little of cadvisor's machine information its raw
// handler asks for.
type machineFacts struct{}

func (machineFacts) GetMachineInfo() (*info.MachineInfo, error) {
	return &info.MachineInfo{NumCores: runtime.NumCPU()}, nil
}
func (machineFacts) GetVersionInfo() (*info.VersionInfo, error) { return &info.VersionInfo{}, nil }

// CadvisorMetrics are the metric kinds the raw handler collects.
var CadvisorMetrics = container.MetricSet{
	container.CpuUsageMetrics:    struct{}{},
	container.MemoryUsageMetrics: struct{}{},
	container.ProcessMetrics:     struct{}{},
}

// NewCadvisor registers cadvisor's raw handler (once per process: cadvisor
// keeps its factories globally).
func NewCadvisor() (*Cadvisor, error) {
	rawFactory.once.Do(func() {
		rawFactory.err = raw.Register(machineFacts{}, nil, CadvisorMetrics, []string{"/"})
	})
	if rawFactory.err != nil {
		return nil, fmt.Errorf("cadvisor raw cgroup handler: %w", rawFactory.err)
	}
	return &Cadvisor{}, nil
}

// Stats reads one cgroup, named by its path below the hierarchy's root
// ("/kubepods/burstable/pod<uid>/<container id>", or "/" for the node).
func (c *Cadvisor) Stats(name string) (*info.ContainerStats, error) {
	_, st, err := c.read(name, false)
	return st, err
}

// Info reads one cgroup's spec (creation time, limits) and stats.
func (c *Cadvisor) Info(name string) (info.ContainerSpec, *info.ContainerStats, error) {
	return c.read(name, true)
}

func (*Cadvisor) read(name string, withSpec bool) (info.ContainerSpec, *info.ContainerStats, error) {
	var spec info.ContainerSpec
	h, accepted, err := container.NewContainerHandler(name, watcher.Raw, nil, true)
	if err != nil {
		return spec, nil, fmt.Errorf("cadvisor handler for %s: %w", name, err)
	}
	if !accepted {
		return spec, nil, fmt.Errorf("cadvisor refused cgroup %s", name)
	}
	defer h.Cleanup()
	if !h.Exists() {
		return spec, nil, fmt.Errorf("cgroup %s: %w", name, os.ErrNotExist)
	}
	if withSpec {
		if spec, err = h.GetSpec(); err != nil {
			return spec, nil, fmt.Errorf("cgroup %s spec: %w", name, err)
		}
	}
	st, err := h.GetStats()
	if err != nil {
		return spec, nil, fmt.Errorf("cgroup %s stats: %w", name, err)
	}
	return spec, st, nil
}

// ContainerIDOf reads a container cgroup's directory name: the ID itself
// under the cgroupfs driver, "cri-containerd-<id>.scope" under systemd.
func ContainerIDOf(dir string) string {
	dir = strings.TrimSuffix(dir, ".scope")
	if i := strings.LastIndexByte(dir, '-'); i >= 0 {
		dir = dir[i+1:]
	}
	return dir
}

// CadvisorName is the name cadvisor gives the cgroup at dir: its path
// below the hierarchy's root.
func CadvisorName(m Manager, dir string) string {
	rel := strings.TrimPrefix(dir, m.Path(Name{}))
	if rel == "" {
		return "/"
	}
	return rel
}
