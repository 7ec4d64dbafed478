package stats

import (
	"github.com/prometheus/client_golang/prometheus"
)

// The kubelet's resource metrics (/metrics/resource), what metrics-server
// scrapes: cumulative CPU and working sets of the node, pods and
// containers, stamped with the time they were read.
var (
	nodeCPUDesc          = prometheus.NewDesc("node_cpu_usage_seconds_total", "Cumulative cpu time consumed by the node in core-seconds", nil, nil)
	nodeMemoryDesc       = prometheus.NewDesc("node_memory_working_set_bytes", "Current working set of the node in bytes", nil, nil)
	nodeSwapDesc         = prometheus.NewDesc("node_swap_usage_bytes", "Current swap usage of the node in bytes. Reported only on non-windows systems", nil, nil)
	containerCPUDesc     = prometheus.NewDesc("container_cpu_usage_seconds_total", "Cumulative cpu time consumed by the container in core-seconds", []string{"container", "pod", "namespace"}, nil)
	containerMemoryDesc  = prometheus.NewDesc("container_memory_working_set_bytes", "Current working set of the container in bytes", []string{"container", "pod", "namespace"}, nil)
	containerSwapDesc    = prometheus.NewDesc("container_swap_usage_bytes", "Current amount of the container swap usage in bytes. Reported only on non-windows systems", []string{"container", "pod", "namespace"}, nil)
	containerStartDesc   = prometheus.NewDesc("container_start_time_seconds", "Start time of the container since unix epoch in seconds", []string{"container", "pod", "namespace"}, nil)
	podCPUDesc           = prometheus.NewDesc("pod_cpu_usage_seconds_total", "Cumulative cpu time consumed by the pod in core-seconds", []string{"pod", "namespace"}, nil)
	podMemoryDesc        = prometheus.NewDesc("pod_memory_working_set_bytes", "Current working set of the pod in bytes", []string{"pod", "namespace"}, nil)
	podSwapDesc          = prometheus.NewDesc("pod_swap_usage_bytes", "Current amount of the pod swap usage in bytes. Reported only on non-windows systems", []string{"pod", "namespace"}, nil)
	resourceScrapeErrors = prometheus.NewDesc("resource_scrape_error", "1 if there was an error while getting container metrics, 0 otherwise", nil, nil)
)

// ResourceMetrics is the collector behind /metrics/resource.
func (p *Provider) ResourceMetrics() prometheus.Collector { return resourceCollector{p} }

type resourceCollector struct{ p *Provider }

func (resourceCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{nodeCPUDesc, nodeMemoryDesc, nodeSwapDesc, containerCPUDesc, containerMemoryDesc,
		containerSwapDesc, containerStartDesc, podCPUDesc, podMemoryDesc, podSwapDesc, resourceScrapeErrors} {
		ch <- d
	}
}

func (c resourceCollector) Collect(ch chan<- prometheus.Metric) {
	r, err := c.p.readCgroups()
	failed := 0.0
	if err != nil {
		failed = 1
	}
	ch <- prometheus.MustNewConstMetric(resourceScrapeErrors, prometheus.GaugeValue, failed)
	if err != nil {
		return
	}
	emit := func(desc *prometheus.Desc, kind prometheus.ValueType, cg cgroupReading, v float64, labels ...string) {
		ch <- prometheus.NewMetricWithTimestamp(cg.Stats.Timestamp, prometheus.MustNewConstMetric(desc, kind, v, labels...))
	}
	emit(nodeCPUDesc, prometheus.CounterValue, r.Node, seconds(r.Node.Stats.Cpu.Usage.Total))
	emit(nodeMemoryDesc, prometheus.GaugeValue, r.Node, float64(r.Node.Stats.Memory.WorkingSet))
	emit(nodeSwapDesc, prometheus.GaugeValue, r.Node, float64(r.Node.Stats.Memory.Swap))
	for _, pr := range r.Pods {
		name, ns := pr.Pod.Name, pr.Pod.Namespace
		emit(podCPUDesc, prometheus.CounterValue, pr.Cgroup, seconds(pr.Cgroup.Stats.Cpu.Usage.Total), name, ns)
		emit(podMemoryDesc, prometheus.GaugeValue, pr.Cgroup, float64(pr.Cgroup.Stats.Memory.WorkingSet), name, ns)
		emit(podSwapDesc, prometheus.GaugeValue, pr.Cgroup, float64(pr.Cgroup.Stats.Memory.Swap), name, ns)
		for container, cg := range pr.Containers {
			emit(containerCPUDesc, prometheus.CounterValue, cg, seconds(cg.Stats.Cpu.Usage.Total), container, name, ns)
			emit(containerMemoryDesc, prometheus.GaugeValue, cg, float64(cg.Stats.Memory.WorkingSet), container, name, ns)
			emit(containerSwapDesc, prometheus.GaugeValue, cg, float64(cg.Stats.Memory.Swap), container, name, ns)
			emit(containerStartDesc, prometheus.GaugeValue, cg, float64(cg.Spec.CreationTime.UnixNano())/1e9, container, name, ns)
		}
	}
}

func seconds(ns uint64) float64 { return float64(ns) / 1e9 }
