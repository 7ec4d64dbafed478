package eviction

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"nodeagent/cgroups"
	"nodeagent/cri"
)

// RuntimeStats is what eviction reads from the container runtime.
type RuntimeStats interface {
	ListContainerStats(ctx context.Context, filter *runtimeapi.ContainerStatsFilter) ([]*runtimeapi.ContainerStats, error)
	ImageFsInfo(ctx context.Context) ([]*runtimeapi.FilesystemUsage, error)
}

// RuntimeImageFs asks the runtime where its images live.
func RuntimeImageFs(rt RuntimeStats) ImageFs {
	return func(ctx context.Context) (string, error) {
		fss, err := rt.ImageFsInfo(ctx)
		if err != nil {
			return "", err
		}
		for _, fs := range fss {
			if m := fs.GetFsId().GetMountpoint(); m != "" {
				return m, nil
			}
		}
		return "", nil
	}
}

// NewHostUsage measures pods on this host: cgroups (containers named by
// containerNames), their directories under rootDir
// and logsDir, and the runtime's writable layers.
func NewHostUsage(ctx context.Context, rt RuntimeStats, tree *cgroups.Tree,
	containerNames func(types.UID) map[string]string, rootDir, logsDir string) HostUsage {
	u := HostUsage{Tree: tree, RootDir: rootDir, LogsDir: logsDir, ContainerNames: containerNames,
		WritableLayers: func(uid types.UID) (bytes, inodes int64, err error) {
			ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			stats, err := rt.ListContainerStats(ctx, &runtimeapi.ContainerStatsFilter{LabelSelector: map[string]string{cri.LabelPodUID: string(uid)}})
			for _, s := range stats {
				bytes += int64(s.GetWritableLayer().GetUsedBytes().GetValue())
				inodes += int64(s.GetWritableLayer().GetInodesUsed().GetValue())
			}
			return bytes, inodes, err
		},
		ContainerLayers: func(uid types.UID) (map[string]int64, error) {
			ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			stats, err := rt.ListContainerStats(ctx, &runtimeapi.ContainerStatsFilter{LabelSelector: map[string]string{cri.LabelPodUID: string(uid)}})
			out := map[string]int64{}
			for _, s := range stats {
				out[s.GetAttributes().GetMetadata().GetName()] += int64(s.GetWritableLayer().GetUsedBytes().GetValue())
			}
			return out, err
		},
	}
	// Writable layers count against nodefs when they live on it.
	if mount, err := RuntimeImageFs(rt)(ctx); err == nil && mount != "" {
		u.ImageFsShared = sameFilesystem(rootDir, mount)
	}
	return u
}

// sameFilesystem tells whether two paths are on one device.
func sameFilesystem(a, b string) bool {
	var sa, sb unix.Stat_t
	return unix.Stat(a, &sa) == nil && unix.Stat(b, &sb) == nil && sa.Dev == sb.Dev
}

// OOMMessage names the OOM killer's victim, its cgroup and pod (podOf
// finds it by UID), and whose limit was hit.
func OOMMessage(k OOMKill, podOf func(types.UID) (*corev1.Pod, bool)) string {
	what, why := k.Summary()
	msg := what + " in cgroup " + k.TaskMemcg
	if uid := PodUIDFromCgroup(k.TaskMemcg); uid != "" {
		if pod, ok := podOf(types.UID(uid)); ok {
			msg += fmt.Sprintf(" (pod %s/%s)", pod.Namespace, pod.Name)
		}
	}
	return msg + why
}

// Summary is what the kernel killed ("Killed process 12 (app)") and why
// (": the memory limit of /kubepods/... was reached", or ": the node ran
// out of memory").
func (k OOMKill) Summary() (what, why string) {
	what = fmt.Sprintf("Killed process %d (%s)", k.PID, k.Process)
	if k.Constraint == "CONSTRAINT_MEMCG" {
		return what, ": the memory limit of " + k.OOMMemcg + " was reached"
	}
	return what, ": the node ran out of memory"
}

// WatchMemoryPressure arms the kernel notifications that ring alarm
// besides the memcg lines HostSource arms on cgroup v1: memory.high
// tripwires on cgroup v2 (returned for HostSource to place) and PSI
// triggers on the node's and (v2) kubepods' memory pressure. stop
// disarms them. What cannot be armed is logged: the poll still sees it.
func WatchMemoryPressure(mgr cgroups.Manager, kubepods cgroups.Name, alarm *Alarm, log *slog.Logger) (wires *Tripwires, stop func()) {
	var stops []func()
	features := cgroups.FeaturesOf(mgr)
	if features.MemoryHigh {
		w, err := NewTripwires(func(at time.Time) { alarm.Ring(at, WokenByTripwire) }, cgroups.MemoryHighSetter(mgr))
		if err != nil {
			log.Warn("no memory.high tripwires; allocatableMemory.available is polled", "err", err)
		} else {
			stops = append(stops, w.Close)
			wires = w
		}
	}
	pressure := []string{"/proc/pressure/memory"}
	if features.PressureFiles {
		pressure = append(pressure, filepath.Join(mgr.Path(kubepods), "memory.pressure"))
	}
	for _, path := range pressure {
		psi, err := WatchPressure(path, func(at time.Time) { alarm.Ring(at, WokenByPSI) })
		if err != nil {
			log.Warn("no PSI trigger; memory stalls there are seen by the poll only", "err", err)
			continue
		}
		log.Info("PSI trigger armed", "path", path, "trigger", psi.Trigger)
		stops = append(stops, psi.Close)
	}
	return wires, func() {
		for _, stop := range stops {
			stop()
		}
	}
}
