package experiment

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"nodeagent/cgroups"
	"nodeagent/internal/qos"
)

// Sample is one reading of the node and its pods.
type Sample struct {
	T float64 `json:"t"` // seconds since the run started
	// Node: MemAvailable, and the root cgroup's working set.
	NodeAvailable  int64 `json:"nodeAvailable"`
	NodeWorkingSet int64 `json:"nodeWorkingSet"`
	// Kubepods: all pods together.
	PodsUsage      int64 `json:"podsUsage"`
	PodsWorkingSet int64 `json:"podsWorkingSet"`
	// PSI of the node's memory: the some avg10 percentage and the total
	// stall time in microseconds.
	PSISomeAvg10 float64 `json:"psiSomeAvg10"`
	PSISomeTotal uint64  `json:"psiSomeTotal"`
	// KernelOOMKills is /proc/vmstat oom_kill since the run started.
	KernelOOMKills uint64 `json:"kernelOOMKills"`
	// Pods by name: working set and usage of each pod cgroup.
	Pods map[string]PodSample `json:"pods,omitempty"`
}

// PodSample is one pod cgroup's reading.
type PodSample struct {
	Usage      int64  `json:"usage"`
	WorkingSet int64  `json:"workingSet"`
	OOMKills   uint64 `json:"oomKills,omitempty"` // memcg oom_kill count (kernel kills inside the pod)
}

// sampler reads the node and the pod cgroups at a fixed rate.
type sampler struct {
	mgr      cgroups.Manager
	kubepods cgroups.Name
	start    time.Time
	oomBase  uint64

	mu   sync.Mutex
	pods map[string]cgroups.Name // pod name -> its cgroup
	// ended is when the pod list first showed each pod's end.
	ended map[string]time.Time
}

func newSampler(mgr cgroups.Manager, cgroupRoot string, start time.Time) *sampler {
	return &sampler{mgr: mgr, kubepods: cgroups.ParseCgroupfs(cgroupRoot).Child("kubepods"), start: start,
		oomBase: vmstatOOMKills(), pods: map[string]cgroups.Name{}, ended: map[string]time.Time{}}
}

// track learns the pods' cgroups from the agent's pod list.
func (s *sampler) track(pods []corev1.Pod, nodeName string) {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range pods {
		p := &pods[i]
		name := strings.TrimSuffix(p.Name, "-"+nodeName)
		if _, seen := s.ended[name]; !seen && podEnded(p) {
			s.ended[name] = now
		}
		if _, ok := s.pods[name]; ok || p.UID == "" {
			continue
		}
		parent := s.kubepods
		if class := qos.Class(p); class != corev1.PodQOSGuaranteed {
			parent = parent.Child(strings.ToLower(string(class)))
		}
		s.pods[name] = parent.Child("pod" + string(p.UID))
	}
}

// podEnded: its phase is terminal or a container terminated.
func podEnded(p *corev1.Pod) bool {
	if p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded {
		return true
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.State.Terminated != nil || cs.LastTerminationState.Terminated != nil {
			return true
		}
	}
	return false
}

// statusSeen is ended in seconds since the start.
func (s *sampler) statusSeen() map[string]float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]float64{}
	for name, at := range s.ended {
		out[name] = Elapsed(s.start, at)
	}
	return out
}

// run samples every period until ctx is done.
func (s *sampler) run(ctx context.Context, period time.Duration, out func(Sample)) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		out(s.read())
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (s *sampler) read() Sample {
	now := time.Now()
	smp := Sample{T: now.Sub(s.start).Seconds()}
	_, smp.NodeAvailable, _ = NodeMemory()
	if st, err := cgroups.ReadMemoryStats(s.mgr, cgroups.Name{}); err == nil {
		smp.NodeWorkingSet = int64(st.WorkingSet())
	}
	if st, err := cgroups.ReadMemoryStats(s.mgr, s.kubepods); err == nil {
		smp.PodsUsage, smp.PodsWorkingSet = int64(st.Usage), int64(st.WorkingSet())
	}
	if p, err := cgroups.ReadPressure("/proc/pressure/memory"); err == nil && p != nil {
		smp.PSISomeAvg10, smp.PSISomeTotal = p.Some.Avg10, p.Some.Total
	}
	if n := vmstatOOMKills(); n >= s.oomBase {
		smp.KernelOOMKills = n - s.oomBase
	}
	s.mu.Lock()
	pods := make(map[string]cgroups.Name, len(s.pods))
	for k, v := range s.pods {
		pods[k] = v
	}
	s.mu.Unlock()
	for name, cg := range pods {
		st, err := cgroups.ReadMemoryStats(s.mgr, cg)
		if err != nil {
			continue // not created yet, or gone
		}
		if smp.Pods == nil {
			smp.Pods = map[string]PodSample{}
		}
		smp.Pods[name] = PodSample{Usage: int64(st.Usage), WorkingSet: int64(st.WorkingSet()), OOMKills: st.OOMKills}
	}
	return smp
}

// NodeMemory reads the node's MemTotal and MemAvailable in bytes.
func NodeMemory() (total, available int64, err error) {
	m, err := cgroups.ReadFlatKeyed("/proc/meminfo")
	if err != nil {
		return 0, 0, err
	}
	// Lines read "MemTotal:   24576000 kB".
	total, available = int64(m["MemTotal:"])*1024, int64(m["MemAvailable:"])*1024
	if total == 0 {
		return 0, 0, fmt.Errorf("no MemTotal in /proc/meminfo")
	}
	return total, available, nil
}

func vmstatOOMKills() uint64 {
	m, err := cgroups.ReadFlatKeyed("/proc/vmstat")
	if err != nil {
		return 0
	}
	return m["oom_kill"]
}
