package stats

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	info "github.com/google/cadvisor/info/v1"
	"golang.org/x/sync/singleflight"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"nodeagent/agent/volumes"
	"nodeagent/cgroups"
	"nodeagent/internal/fsinfo"
)

// Provider gathers the node's and its pods' stats.
type Provider struct {
	NodeName string
	Tree     *cgroups.Tree
	Cadvisor *cgroups.Cadvisor
	// Pods lists the pods with their status (container IDs, start times).
	Pods func() []corev1.Pod
	// ContainerStats are the runtime's stats of every container
	// (writable layers); nil: no rootfs stats.
	ContainerStats func(ctx context.Context) ([]*runtimeapi.ContainerStats, error)
	// ImageFs is the runtime's image filesystem usage; nil: none.
	ImageFs func(ctx context.Context) ([]*runtimeapi.FilesystemUsage, error)
	RootDir string // nodefs, and emptyDirs under <RootDir>/pods/<uid>/volumes
	LogsDir string // logs under <LogsDir>/<ns>_<name>_<uid>/<container>
	// MemoryCapacity and PIDMax are the node's, from its machine facts.
	MemoryCapacity int64
	PIDMax         int64
	// DefaultInterface is the node's default-route interface.
	DefaultInterface string
	// BootTime is when the node started (the node stats' start time).
	BootTime      time.Time
	KernelVersion string
	// Disk measures logs and emptyDirs in the background; nil: none are
	// reported (volumeStatsAggPeriod below 0).
	Disk *DiskUsage

	rates cpuRates
	// summaries is one Summary for every request that asks meanwhile:
	// each reads every pod's cgroups.
	summaries singleflight.Group
}

// disk is dir's last measure, if any.
func (p *Provider) disk(dir string) (Usage, bool) {
	if p.Disk == nil {
		return Usage{}, false
	}
	return p.Disk.Get(dir)
}

// Sample reads the CPU counter of every cgroup a scrape reads, so the
// first scrape has CPU rates; the agent calls it periodically, as the
// kubelet's cadvisor housekeeping keeps rates. Only the counter is read:
// a whole cadvisor reading of 110 pods' cgroups cost about 200 ms of CPU
// per pass, most of an idle node's.
func (p *Provider) Sample() {
	seen := map[string]bool{}
	observe := func(name string) {
		if total, err := p.Tree.CPUUsage(name); err == nil {
			p.rates.observe(name, time.Now(), total, seen)
		}
	}
	observe("/")
	observe(p.Tree.CadvisorName(p.Tree.Dir(p.Tree.Kubepods())))
	pods := p.Pods()
	for i := range pods {
		name, ok := p.Tree.PodCgroup(&pods[i])
		if !ok {
			continue
		}
		dir := p.Tree.Dir(name)
		observe(p.Tree.CadvisorName(dir))
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if e.IsDir() { // the containers' and the sandbox's
				observe(p.Tree.CadvisorName(filepath.Join(dir, e.Name())))
			}
		}
	}
	p.rates.forget(seen)
}

// Summary is /stats/summary. Requests that come while one is made share
// its answer, which they must not modify.
func (p *Provider) Summary(ctx context.Context) (*statsapi.Summary, error) {
	res := p.summaries.DoChan("summary", func() (any, error) {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		return p.summary(ctx)
	})
	select {
	case r := <-res:
		if r.Err != nil {
			return nil, r.Err
		}
		return r.Val.(*statsapi.Summary), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (p *Provider) summary(ctx context.Context) (*statsapi.Summary, error) {
	r, err := p.readCgroups()
	if err != nil {
		return nil, fmt.Errorf("node cgroup stats: %w", err)
	}
	now := metav1.NewTime(r.Node.Stats.Timestamp)
	rootfs := map[string]*statsapi.FsStats{} // by container ID
	if p.ContainerStats != nil {
		if list, err := p.ContainerStats(ctx); err == nil {
			for _, cs := range list {
				wl := cs.GetWritableLayer()
				if wl == nil {
					continue
				}
				rootfs[cs.GetAttributes().GetId()] = &statsapi.FsStats{Time: metav1.NewTime(time.Unix(0, wl.GetTimestamp())),
					UsedBytes: ptr(wl.GetUsedBytes().GetValue()), InodesUsed: ptr(wl.GetInodesUsed().GetValue())}
			}
		}
	}
	nodefs := statFs(p.RootDir, now)

	s := &statsapi.Summary{Node: statsapi.NodeStats{
		NodeName:  p.NodeName,
		StartTime: metav1.NewTime(p.BootTime),
		CPU:       cpuStats(r.Node),
		Memory:    memoryStats(r.Node, uint64(p.MemoryCapacity)),
		Swap:      swapStats(r.Node),
		Network:   networkStats("/proc/net/dev", p.DefaultInterface, now),
		Fs:        nodefs,
		Runtime:   &statsapi.RuntimeStats{ImageFs: p.imageFs(ctx, now)},
		Rlimit:    &statsapi.RlimitStats{Time: now, MaxPID: &p.PIDMax, NumOfRunningProcesses: runningProcesses()},
	}}
	if r.Kubepods != nil {
		s.Node.SystemContainers = append(s.Node.SystemContainers, statsapi.ContainerStats{
			Name: statsapi.SystemContainerPods, StartTime: metav1.NewTime(r.Kubepods.Spec.CreationTime),
			CPU: cpuStats(*r.Kubepods), Memory: memoryStats(*r.Kubepods, uint64(p.MemoryCapacity)),
		})
	}
	s.Pods = []statsapi.PodStats{}
	for _, pr := range r.Pods {
		s.Pods = append(s.Pods, p.podStats(pr, rootfs, nodefs, now))
	}
	return s, nil
}

func (p *Provider) podStats(pr podReading, rootfs map[string]*statsapi.FsStats, nodefs *statsapi.FsStats, now metav1.Time) statsapi.PodStats {
	pod := pr.Pod
	ps := statsapi.PodStats{
		PodRef:     statsapi.PodReference{Name: pod.Name, Namespace: pod.Namespace, UID: string(pod.UID)},
		StartTime:  metav1.NewTime(pr.Cgroup.Spec.CreationTime),
		CPU:        cpuStats(pr.Cgroup),
		Memory:     memoryStats(pr.Cgroup, 0),
		Swap:       swapStats(pr.Cgroup),
		Containers: []statsapi.ContainerStats{},
	}
	if pod.Status.StartTime != nil {
		ps.StartTime = *pod.Status.StartTime
	}
	if len(pr.Pids) > 0 && !pod.Spec.HostNetwork {
		ps.Network = networkStats(fmt.Sprintf("/proc/%d/net/dev", pr.Pids[0]), "eth0", now)
	}
	// cadvisor counts a cgroup's own processes; a pod cgroup holds none
	// itself, so the pod's are its containers', as the kubelet sums them.
	var procs uint64
	for _, c := range pr.Containers {
		procs += c.Stats.Processes.ProcessCount
	}
	ps.ProcessStats = &statsapi.ProcessStats{ProcessCount: &procs}

	// Ephemeral storage: the containers' writable layers and logs, and
	// the emptyDir volumes, as the kubelet sums them.
	var ephemeral, ephemeralInodes uint64
	ids := map[string]string{}
	for id, name := range containerNames(pod) {
		ids[name] = id
	}
	for _, name := range sortedKeys(pr.Containers) {
		c := pr.Containers[name]
		cs := statsapi.ContainerStats{Name: name, StartTime: metav1.NewTime(c.Spec.CreationTime),
			CPU: cpuStats(c), Memory: memoryStats(c, 0), Swap: swapStats(c)}
		if fs, ok := rootfs[ids[name]]; ok {
			cs.Rootfs = withCapacity(fs, nodefs)
			ephemeral += deref(fs.UsedBytes)
			ephemeralInodes += deref(fs.InodesUsed)
		}
		if u, ok := p.disk(logDir(p.LogsDir, pod, name)); ok {
			cs.Logs = withCapacity(&statsapi.FsStats{Time: metav1.NewTime(u.Time), UsedBytes: ptr(uint64(u.Bytes)), InodesUsed: ptr(uint64(u.Inodes))}, nodefs)
			ephemeral += uint64(u.Bytes)
			ephemeralInodes += uint64(u.Inodes)
		}
		ps.Containers = append(ps.Containers, cs)
	}
	for _, v := range pod.Spec.Volumes {
		dir := volumes.UsageDir(p.RootDir, pod.UID, &v)
		if dir == "" {
			continue
		}
		u, ok := p.disk(dir)
		if !ok {
			continue
		}
		ps.VolumeStats = append(ps.VolumeStats, statsapi.VolumeStats{Name: v.Name,
			FsStats: *withCapacity(&statsapi.FsStats{Time: metav1.NewTime(u.Time), UsedBytes: ptr(uint64(u.Bytes)), InodesUsed: ptr(uint64(u.Inodes))}, nodefs)})
		ephemeral += uint64(u.Bytes)
		ephemeralInodes += uint64(u.Inodes)
	}
	ps.EphemeralStorage = withCapacity(&statsapi.FsStats{Time: now, UsedBytes: &ephemeral, InodesUsed: &ephemeralInodes}, nodefs)
	return ps
}

// cpuStats converts a cadvisor reading: cumulative usage, and the rate.
func cpuStats(c cgroupReading) *statsapi.CPUStats {
	total := c.Stats.Cpu.Usage.Total
	return &statsapi.CPUStats{Time: metav1.NewTime(c.Stats.Timestamp), UsageCoreNanoSeconds: &total, UsageNanoCores: c.NanoCores}
}

// memoryStats converts a cadvisor reading as the kubelet does; available
// is the limit (or, for the node, capacity) minus the working set.
func memoryStats(c cgroupReading, limit uint64) *statsapi.MemoryStats {
	m := c.Stats.Memory
	out := &statsapi.MemoryStats{Time: metav1.NewTime(c.Stats.Timestamp),
		UsageBytes: ptr(m.Usage), WorkingSetBytes: ptr(m.WorkingSet), RSSBytes: ptr(m.RSS),
		PageFaults: ptr(m.ContainerData.Pgfault), MajorPageFaults: ptr(m.ContainerData.Pgmajfault)}
	if limit == 0 && c.Spec.HasMemory && c.Spec.Memory.Limit > 0 && c.Spec.Memory.Limit < 1<<62 {
		limit = c.Spec.Memory.Limit
	}
	if limit > 0 {
		avail := uint64(0)
		if limit > m.WorkingSet {
			avail = limit - m.WorkingSet
		}
		out.AvailableBytes = &avail
	}
	if psi := m.PSI; psi.Some.Total > 0 || psi.Full.Total > 0 {
		out.PSI = psiStats(psi)
	}
	return out
}

// swapStats is the cgroup's swap use and, under a swap limit, what is
// left of it, as the kubelet's cadvisorInfoToSwapStats.
func swapStats(c cgroupReading) *statsapi.SwapStats {
	if !c.Spec.HasMemory {
		return nil
	}
	used := c.Stats.Memory.Swap
	out := &statsapi.SwapStats{Time: metav1.NewTime(c.Stats.Timestamp), SwapUsageBytes: &used}
	if limit := c.Spec.Memory.SwapLimit; limit < 1<<62 {
		avail := uint64(0)
		if limit > used {
			avail = limit - used
		}
		out.SwapAvailableBytes = &avail
	}
	return out
}

func psiStats(p info.PSIStats) *statsapi.PSIStats {
	return &statsapi.PSIStats{
		Some: statsapi.PSIData{Total: p.Some.Total, Avg10: p.Some.Avg10, Avg60: p.Some.Avg60, Avg300: p.Some.Avg300},
		Full: statsapi.PSIData{Total: p.Full.Total, Avg10: p.Full.Avg10, Avg60: p.Full.Avg60, Avg300: p.Full.Avg300},
	}
}

// imageFs is the runtime's image filesystem: its size from statfs, its
// use as the runtime reports it.
func (p *Provider) imageFs(ctx context.Context, now metav1.Time) *statsapi.FsStats {
	if p.ImageFs == nil {
		return nil
	}
	list, err := p.ImageFs(ctx)
	if err != nil || len(list) == 0 {
		return nil
	}
	u := list[0]
	fs := statFs(u.GetFsId().GetMountpoint(), now)
	if fs == nil {
		fs = &statsapi.FsStats{Time: now}
	}
	fs.UsedBytes = ptr(u.GetUsedBytes().GetValue())
	if u.GetInodesUsed() != nil {
		fs.InodesUsed = ptr(u.GetInodesUsed().GetValue())
	}
	return fs
}

// statFs is a filesystem's size and use; nil when it cannot be read.
func statFs(path string, now metav1.Time) *statsapi.FsStats {
	if path == "" {
		return nil
	}
	u, err := fsinfo.Stat(path)
	if err != nil {
		return nil
	}
	return &statsapi.FsStats{Time: now,
		CapacityBytes: ptr(u.Capacity), AvailableBytes: ptr(u.Available), UsedBytes: ptr(u.Used),
		Inodes: ptr(u.Inodes), InodesFree: ptr(u.InodesFree), InodesUsed: ptr(u.Inodes - u.InodesFree)}
}

// withCapacity gives a usage reading its filesystem's size and room.
func withCapacity(fs, on *statsapi.FsStats) *statsapi.FsStats {
	if on != nil {
		fs.CapacityBytes, fs.AvailableBytes, fs.Inodes, fs.InodesFree = on.CapacityBytes, on.AvailableBytes, on.Inodes, on.InodesFree
	}
	return fs
}

// networkStats is a /proc/<pid>/net/dev as the Summary API has it: every
// interface but lo, with the primary one inlined.
func networkStats(path, primary string, now metav1.Time) *statsapi.NetworkStats {
	ifaces, ok := readNetDev(path)
	if !ok {
		return nil
	}
	ns := &statsapi.NetworkStats{Time: now}
	for _, c := range ifaces {
		is := statsapi.InterfaceStats{Name: c.Name, RxBytes: ptr(c.RxBytes), RxErrors: ptr(c.RxErrors),
			TxBytes: ptr(c.TxBytes), TxErrors: ptr(c.TxErrors)}
		ns.Interfaces = append(ns.Interfaces, is)
		if c.Name == primary {
			ns.InterfaceStats = is
		}
	}
	if ns.Name == "" && len(ns.Interfaces) > 0 {
		ns.InterfaceStats = ns.Interfaces[0]
	}
	return ns
}

// maxInterfaces bounds what is read of a pod's net/dev: a container with
// NET_ADMIN makes as many interfaces as it likes.
const maxInterfaces = 64

// readNetDev reads the counters of every interface but lo in a
// /proc/<pid>/net/dev, in cadvisor's terms.
func readNetDev(path string) ([]info.InterfaceStats, bool) {
	f, err := os.Open(path)
	if err != nil {
		return nil, false
	}
	defer f.Close()
	var out []info.InterfaceStats
	sc := bufio.NewScanner(f)
	for sc.Scan() && len(out) < maxInterfaces {
		name, counters, ok := strings.Cut(sc.Text(), ":")
		name = strings.TrimSpace(name)
		fields := strings.Fields(counters)
		if !ok || name == "lo" || len(fields) < 12 {
			continue
		}
		num := func(i int) uint64 { v, _ := strconv.ParseUint(fields[i], 10, 64); return v }
		// rx: bytes packets errs drop fifo frame compressed multicast; tx: bytes packets errs drop ...
		out = append(out, info.InterfaceStats{Name: name,
			RxBytes: num(0), RxPackets: num(1), RxErrors: num(2), RxDropped: num(3),
			TxBytes: num(8), TxPackets: num(9), TxErrors: num(10), TxDropped: num(11)})
	}
	return out, true
}

// runningProcesses is the kernel's process count (sysinfo), as the
// kubelet's rlimit stats and the pid.available signal count them.
func runningProcesses() *int64 {
	var si unix.Sysinfo_t
	if unix.Sysinfo(&si) != nil {
		return nil
	}
	n := int64(si.Procs)
	return &n
}

func ptr(v uint64) *uint64 { return &v }

func deref(v *uint64) uint64 {
	if v == nil {
		return 0
	}
	return *v
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
