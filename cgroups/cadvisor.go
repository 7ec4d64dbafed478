package cgroups

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"

	"github.com/google/cadvisor/container"
	"github.com/google/cadvisor/container/raw"
	"github.com/google/cadvisor/fs"
	// Block-device filesystems (ext4, xfs...) for the node's fs series.
	_ "github.com/google/cadvisor/fs/vfs/install"
	info "github.com/google/cadvisor/info/v1"
	"github.com/google/cadvisor/utils/sysfs"
	"github.com/google/cadvisor/utils/sysinfo"
	"github.com/google/cadvisor/watcher"
)

// Cadvisor reads cgroups through cadvisor's raw cgroup handler, as the
// kubelet's stats do: CPU, memory, process and block I/O stats of the
// node, pod and container cgroups (and the node's network and filesystems). Decision paths (the eviction signals, the victims'
// working sets) read the cgroup files directly instead (ReadMemoryStats):
// one cadvisor GetStats costs about 200 µs per cgroup here (all of
// memory.stat and the process table), more than a whole decision.
type Cadvisor struct{}

var rawFactory struct {
	once sync.Once
	err  error
}

// machineFacts is the little of cadvisor's machine information its raw
// handler asks for: the CPU count, and the block devices that name the
// disk I/O samples.
type machineFacts struct{}

var blockDevices = sync.OnceValue(func() map[string]info.DiskInfo {
	disks, err := sysinfo.GetBlockDeviceInfo(sysfs.NewRealSysFs())
	if err != nil {
		return nil // samples go unnamed
	}
	return disks
})

func (machineFacts) GetMachineInfo() (*info.MachineInfo, error) {
	return &info.MachineInfo{NumCores: runtime.NumCPU(), DiskMap: blockDevices()}, nil
}
func (machineFacts) GetVersionInfo() (*info.VersionInfo, error) { return &info.VersionInfo{}, nil }

// CadvisorMetrics are the metric kinds the raw handler collects and
// /metrics/cadvisor serves, the kubelet's set. Network and filesystem
// usage are read for the root cgroup only; CPU load reads 0, as it does
// under the kubelet, whose cadvisor runs without its netlink load reader.
var CadvisorMetrics = container.MetricSet{
	container.CpuUsageMetrics:     struct{}{},
	container.CpuLoadMetrics:      struct{}{},
	container.MemoryUsageMetrics:  struct{}{},
	container.ProcessMetrics:      struct{}{},
	container.DiskIOMetrics:       struct{}{},
	container.DiskUsageMetrics:    struct{}{},
	container.NetworkUsageMetrics: struct{}{},
	container.OOMMetrics:          struct{}{},
}

// NewCadvisor registers cadvisor's raw handler (once per process: cadvisor
// keeps its factories globally).
func NewCadvisor() (*Cadvisor, error) {
	rawFactory.once.Do(func() {
		var fsInfo fs.FsInfo
		if fsInfo, rawFactory.err = fs.NewFsInfo(fs.Context{}); rawFactory.err == nil {
			rawFactory.err = raw.Register(machineFacts{}, fsInfo, CadvisorMetrics, []string{"/"})
		}
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
	addProcessFacts(h, name, st)
	return spec, st, nil
}

// addProcessFacts fills in what the raw handler leaves out and the
// kubelet's runtime handlers report: the open-files limit of a container's
// first process (the raw handler reads it for the root only), and the OOM
// kills in the cgroup.
func addProcessFacts(h container.ContainerHandler, name string, st *info.ContainerStats) {
	dir, err := h.GetCgroupPath("memory")
	if err != nil {
		return
	}
	st.OOMEvents = oomKills(dir)
	if name == "/" || len(st.Processes.Ulimits) > 0 {
		return
	}
	if pid, ok := firstPid(dir); ok {
		if limit, ok := openFilesLimit(fmt.Sprintf("/proc/%d/limits", pid)); ok {
			st.Processes.Ulimits = []info.UlimitSpec{limit}
		}
	}
}

// firstPid is the first process listed in the cgroup's cgroup.procs.
func firstPid(dir string) (int, bool) {
	f, err := os.Open(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(io.LimitReader(f, 64))
	if !sc.Scan() {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(sc.Text()))
	return pid, err == nil && pid > 0
}

// oomKills is the memory cgroup's count of processes the OOM killer
// killed in it: v2 memory.events, v1 memory.oom_control (kernel 4.13 on).
func oomKills(dir string) uint64 {
	for _, file := range []string{"memory.events", "memory.oom_control"} {
		if kv, err := ReadFlatKeyed(filepath.Join(dir, file)); err == nil {
			return kv["oom_kill"]
		}
	}
	return 0
}

// openFilesLimit reads the "Max open files" line of a /proc/<pid>/limits
// as cadvisor names it ("max_open_files"); "unlimited" is -1.
func openFilesLimit(path string) (info.UlimitSpec, bool) {
	f, err := os.Open(path)
	if err != nil {
		return info.UlimitSpec{}, false
	}
	defer f.Close()
	sc := bufio.NewScanner(io.LimitReader(f, 16<<10))
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "Max open files")
		if !ok {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) != 3 {
			return info.UlimitSpec{}, false
		}
		soft, okSoft := parseLimit(fields[0])
		hard, okHard := parseLimit(fields[1])
		return info.UlimitSpec{Name: "max_open_files", SoftLimit: soft, HardLimit: hard}, okSoft && okHard
	}
	return info.UlimitSpec{}, false
}

func parseLimit(s string) (int64, bool) {
	if s == "unlimited" {
		return -1, true
	}
	v, err := strconv.ParseInt(s, 10, 64)
	return v, err == nil
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
