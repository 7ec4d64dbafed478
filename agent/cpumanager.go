package agent

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/cpuset"

	"nodeagent/agent/pods"
	"nodeagent/agent/status"
	"nodeagent/api"
	"nodeagent/cgroups/cpumanager"
	"nodeagent/internal/layout"
)

// buildCPUManager makes the CPU manager of cpuManagerPolicy static (none
// leaves p.cpus nil): the reserved CPUs are reservedSystemCPUs, else the
// reserved cpu rounded up to whole CPUs taken by topology.
func (a *Agent) buildCPUManager(p *parts) error {
	if !a.cfg.CPUManagerStatic() {
		return nil
	}
	topo, err := cpumanager.ReadTopology("/sys")
	if err != nil {
		return fmt.Errorf("cpuManagerPolicy static: read the CPU topology: %w", err)
	}
	// The NUMA options change nothing where there is one NUMA node and
	// one socket; nodeagent has no NUMA alignment for the others.
	if on := a.cfg.NUMAOptions(); len(on) > 0 {
		if numa, sockets := cpumanager.NUMANodes("/sys"), topo.Sockets(); numa > 1 || sockets > 1 {
			return fmt.Errorf("cpuManagerPolicyOptions %s: this host has %d NUMA nodes and %d sockets; nodeagent aligns CPUs by NUMA node and socket only on hosts of one", strings.Join(on, ", "), numa, sockets)
		}
	}
	reserved := a.cfg.ReservedCPUs()
	if reserved.IsEmpty() {
		if reserved, err = cpumanager.Reserve(topo, a.cfg.ReservedCPUCount()); err != nil {
			return fmt.Errorf("cpuManagerPolicy static: reserve %d CPUs for kubeReserved and systemReserved cpu: %w", a.cfg.ReservedCPUCount(), err)
		}
	}
	m, err := cpumanager.New(cpumanager.Options{Topology: topo, Reserved: reserved, StrictReservation: a.cfg.StrictCPUReservation(),
		FullPhysicalCPUsOnly: a.cfg.FullPCPUsOnly(), PreferAlignByUncoreCache: a.cfg.PreferAlignByUncoreCache(), StateFile: layout.Root(a.opts.RootDir).CPUManagerState(), Log: a.log.With("component", "cpumanager")})
	if err != nil {
		return fmt.Errorf("cpuManagerPolicy static: %w", err)
	}
	p.cpus = m
	a.log.Info("CPU manager static policy", "reserved", reserved.String(), "shared_pool", m.Shared().String(),
		"strict_reservation", a.cfg.StrictCPUReservation(), "full_pcpus_only", a.cfg.FullPCPUsOnly(), "prefer_align_by_uncore_cache", a.cfg.PreferAlignByUncoreCache())
	return nil
}

// podCPUs is the CPU manager for the pod manager: a nil interface under
// policy none.
func (p *parts) podCPUs() pods.CPUs {
	if p.cpus == nil {
		return nil
	}
	return p.cpus
}

// cpuManagerView is /cpus: the policy, and under static the reserved CPUs,
// the shared pool and each exclusive assignment with its pod's name.
func cpuManagerView(cpus *cpumanager.Manager, store *status.Store) api.CPUManager {
	if cpus == nil {
		return api.CPUManager{Policy: "none"}
	}
	v := api.CPUManager{Policy: cpumanager.PolicyStatic, Reserved: cpus.Reserved().String(), SharedPool: cpus.Shared().String(), StrictReservation: cpus.Strict()}
	all := cpus.All()
	for _, uid := range slices.Sorted(maps.Keys(all)) {
		pod := ""
		if p, ok := store.Get(uid); ok {
			pod = p.Namespace + "/" + p.Name
		}
		for _, name := range slices.Sorted(maps.Keys(all[uid])) {
			v.Exclusive = append(v.Exclusive, api.CPUAssignment{PodUID: uid, Pod: pod, Container: name, CPUs: all[uid][name].String()})
		}
	}
	return v
}

var (
	cpuPinningRequestsDesc = prometheus.NewDesc("kubelet_cpu_manager_pinning_requests_total",
		"The number of cpu core allocations which required pinning.", nil, nil)
	cpuPinningErrorsDesc = prometheus.NewDesc("kubelet_cpu_manager_pinning_errors_total",
		"The number of cpu core allocations which required pinning failed.", nil, nil)
	cpuSharedPoolDesc = prometheus.NewDesc("kubelet_cpu_manager_shared_pool_size_millicores",
		"The size of the shared CPU pool for non-guaranteed QoS pods, in millicores.", nil, nil)
	cpuExclusiveDesc = prometheus.NewDesc("kubelet_cpu_manager_exclusive_cpu_allocation_count",
		"The total number of CPUs exclusively allocated to containers running on this node", nil, nil)
	alignedDesc = prometheus.NewDesc("kubelet_container_aligned_compute_resources_count",
		"Cumulative number of aligned compute resources allocated to containers by alignment type.", []string{"scope", "boundary"}, nil)
	alignedFailureDesc = prometheus.NewDesc("kubelet_container_aligned_compute_resources_failure_count",
		"Cumulative number of failures to allocate aligned compute resources to containers by alignment type.", []string{"scope", "boundary"}, nil)
)

// cpuManagerCollector is the kubelet's CPU manager metrics, read at scrape
// time from the static policy's manager.
type cpuManagerCollector struct{ m *cpumanager.Manager }

func (c cpuManagerCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- cpuPinningRequestsDesc
	ch <- cpuPinningErrorsDesc
	ch <- cpuSharedPoolDesc
	ch <- cpuExclusiveDesc
	ch <- alignedDesc
	ch <- alignedFailureDesc
}

func (c cpuManagerCollector) Collect(ch chan<- prometheus.Metric) {
	requests, errors := c.m.Pinning()
	exclusive := cpuset.New()
	for _, containers := range c.m.All() {
		for _, set := range containers {
			exclusive = exclusive.Union(set)
		}
	}
	ch <- prometheus.MustNewConstMetric(cpuPinningRequestsDesc, prometheus.CounterValue, float64(requests))
	ch <- prometheus.MustNewConstMetric(cpuPinningErrorsDesc, prometheus.CounterValue, float64(errors))
	// The kubelet's figure leaves the reserved CPUs out (GetAvailableCPUs).
	available := c.m.Shared().Difference(c.m.Reserved())
	ch <- prometheus.MustNewConstMetric(cpuSharedPoolDesc, prometheus.GaugeValue, float64(available.Size()*1000))
	ch <- prometheus.MustNewConstMetric(cpuExclusiveDesc, prometheus.GaugeValue, float64(exclusive.Size()))
	// As the kubelet's static policy, every series from the start:
	// physical_cpu counted under full-pcpus-only, uncore_cache for each
	// new assignment within one last-level cache.
	physical, failed, uncore := c.m.Alignment()
	ch <- prometheus.MustNewConstMetric(alignedDesc, prometheus.CounterValue, float64(physical), "container", "physical_cpu")
	ch <- prometheus.MustNewConstMetric(alignedFailureDesc, prometheus.CounterValue, float64(failed), "container", "physical_cpu")
	ch <- prometheus.MustNewConstMetric(alignedDesc, prometheus.CounterValue, float64(uncore), "container", "uncore_cache")
}

// cpuMetrics are the CPU manager's collectors for /metrics, under the
// static policy only (the kubelet's read 0 under none).
func (p *parts) cpuMetrics() []prometheus.Collector {
	if p.cpus == nil {
		return nil
	}
	return []prometheus.Collector{cpuManagerCollector{p.cpus}}
}
