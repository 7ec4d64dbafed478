package stats

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	info "github.com/google/cadvisor/info/v1"
	corev1 "k8s.io/api/core/v1"

	"nodeagent/cgroups"
)

// cgroupReading is one cgroup read through cadvisor, with its CPU rate.
type cgroupReading struct {
	Name  string // cadvisor's name: the path below the hierarchy's root
	Spec  info.ContainerSpec
	Stats *info.ContainerStats
	// NanoCores is the CPU rate since an earlier reading at least
	// minRateWindow before; nil until there is one.
	NanoCores *uint64
}

// podReading is a pod cgroup and its containers' cgroups.
type podReading struct {
	Pod        *corev1.Pod
	Cgroup     cgroupReading
	Containers map[string]cgroupReading // by container name
	// Sandbox is the pod sandbox's cgroup with the pod's network counters
	// (nil for host-network pods); nil when it cannot be told apart.
	Sandbox *cgroupReading
	Pids    []int // the pod's processes
}

// reading is one pass over the node's cgroups.
type reading struct {
	Node     cgroupReading
	Kubepods *cgroupReading
	Pods     []podReading
}

// minRateWindow is the shortest window a CPU rate is taken over; a scrape
// right after another uses the reading before.
const minRateWindow = time.Second

// cpuRates keeps two cumulative CPU readings per cgroup, so every read has
// a rate over at least minRateWindow once the cgroup was seen that long ago.
type cpuRates struct {
	mu      sync.Mutex
	samples map[string][2]cpuSample // older, newer
}

type cpuSample struct {
	at    time.Time
	total uint64 // ns
}

func (r *cpuRates) observe(name string, at time.Time, total uint64, seen map[string]bool) *uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.samples == nil {
		r.samples = map[string][2]cpuSample{}
	}
	seen[name] = true
	s := r.samples[name]
	now := cpuSample{at: at, total: total}
	var base cpuSample
	switch {
	case !s[1].at.IsZero() && at.Sub(s[1].at) >= minRateWindow:
		base = s[1]
		r.samples[name] = [2]cpuSample{s[1], now}
	case !s[0].at.IsZero():
		base = s[0] // keep the window; the newer sample stays for the next reader
	default:
		if s[1].at.IsZero() {
			r.samples[name] = [2]cpuSample{{}, now}
		}
		return nil
	}
	if !at.After(base.at) || total < base.total {
		return nil
	}
	rate := uint64(float64(total-base.total) / at.Sub(base.at).Seconds())
	return &rate
}

// forget drops the cgroups that were not seen in the last pass.
func (r *cpuRates) forget(seen map[string]bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for name := range r.samples {
		if !seen[name] {
			delete(r.samples, name)
		}
	}
}

// readCgroups reads the node, kubepods, and each pod's and container's
// cgroup. Cgroups that cannot be read are left out (a pod that just ended).
func (p *Provider) readCgroups() (reading, error) {
	seen := map[string]bool{}
	defer p.rates.forget(seen)
	read := func(name string) (cgroupReading, bool) {
		spec, st, err := p.Cadvisor.Info(name)
		if err != nil || st == nil {
			return cgroupReading{}, false
		}
		return cgroupReading{Name: name, Spec: spec, Stats: st,
			NanoCores: p.rates.observe(name, st.Timestamp, st.Cpu.Usage.Total, seen)}, true
	}
	var r reading
	node, ok := read("/")
	if !ok {
		_, _, err := p.Cadvisor.Info("/")
		return r, err
	}
	r.Node = node
	if kp, ok := read(p.Tree.CadvisorName(p.Tree.Dir(p.Tree.Kubepods()))); ok {
		r.Kubepods = &kp
	}
	pods := p.Pods()
	for i := range pods {
		pod := &pods[i]
		name, ok := p.Tree.PodCgroup(pod)
		if !ok {
			continue
		}
		dir := p.Tree.Dir(name)
		cg, ok := read(p.Tree.CadvisorName(dir))
		if !ok {
			continue
		}
		pr := podReading{Pod: pod, Cgroup: cg, Containers: map[string]cgroupReading{}}
		// Any of the pod's processes leads to its network namespace.
		pr.Pids, _ = p.Tree.Pids(name)
		names := containerNames(pod)
		entries, _ := os.ReadDir(dir)
		var others []string
		for _, e := range entries {
			if !e.IsDir() {
				continue
			}
			container, ok := names[cgroups.ContainerIDOf(e.Name())]
			if !ok {
				others = append(others, e.Name())
				continue
			}
			if c, ok := read(p.Tree.CadvisorName(filepath.Join(dir, e.Name()))); ok {
				pr.Containers[container] = c
			}
		}
		// The one cgroup that is no container's is the sandbox's.
		if len(others) == 1 {
			if sb, ok := read(p.Tree.CadvisorName(filepath.Join(dir, others[0]))); ok {
				if len(pr.Pids) > 0 && !pod.Spec.HostNetwork {
					sb.Stats.Network = podNetwork(pr.Pids[0])
					sb.Spec.HasNetwork = len(sb.Stats.Network.Interfaces) > 0
				}
				pr.Sandbox = &sb
			}
		}
		r.Pods = append(r.Pods, pr)
	}
	return r, nil
}

// podNetwork reads the counters of the network namespace pid is in, the
// pod's, as cadvisor reports a sandbox's.
func podNetwork(pid int) info.NetworkStats {
	ifaces, ok := readNetDev(fmt.Sprintf("/proc/%d/net/dev", pid))
	if !ok || len(ifaces) == 0 {
		return info.NetworkStats{}
	}
	ns := info.NetworkStats{InterfaceStats: ifaces[0], Interfaces: ifaces}
	for _, is := range ifaces {
		if is.Name == "eth0" {
			ns.InterfaceStats = is
		}
	}
	return ns
}

// containerNames maps the IDs of the pod's current containers to their
// names, from its status.
func containerNames(pod *corev1.Pod) map[string]string {
	names := map[string]string{}
	for _, list := range [][]corev1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for _, cs := range list {
			if _, id, ok := strings.Cut(cs.ContainerID, "://"); ok {
				names[id] = cs.Name
			}
		}
	}
	return names
}
