package agent

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"nodeagent/agent/pleg"
)

// podStartBuckets are the kubelet's for its pod start metrics (seconds).
var podStartBuckets = []float64{0.5, 1, 2, 3, 4, 5, 6, 8, 10, 20, 30, 45, 60, 120, 180, 240, 300, 360, 480, 600, 900, 1200, 1800, 2700, 3600}

// nodeMetrics are the kubelet's node-level series, under the kubelet's
// names so that kubelet dashboards work, plus the agent's OOM kill count.
type nodeMetrics struct {
	relist          prometheus.Histogram
	podStart        prometheus.Histogram
	podStartSLI     prometheus.Histogram
	runtimeDuration *prometheus.HistogramVec
	runtimeErrors   *prometheus.CounterVec
	kernelOOMKills  *prometheus.CounterVec
	apiRequests     *prometheus.CounterVec
}

func newNodeMetrics() *nodeMetrics {
	return &nodeMetrics{
		relist: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "kubelet_pleg_relist_duration_seconds",
			Help: "Duration in seconds for relisting pods in PLEG.", Buckets: prometheus.DefBuckets}),
		podStart: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "kubelet_pod_start_duration_seconds",
			Help: "Duration in seconds from the agent seeing a pod for the first time to the pod starting to run.", Buckets: podStartBuckets}),
		podStartSLI: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "kubelet_pod_start_sli_duration_seconds",
			Help: "Duration in seconds to start a pod, excluding time to pull images and run init containers.", Buckets: podStartBuckets}),
		runtimeDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "kubelet_runtime_operations_duration_seconds",
			Help: "Duration in seconds of runtime operations, by operation type.", Buckets: prometheus.ExponentialBuckets(.005, 2.5, 14)},
			[]string{"operation_type"}),
		runtimeErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kubelet_runtime_operations_errors_total",
			Help: "Cumulative number of runtime operation errors, by operation type."}, []string{"operation_type"}),
		kernelOOMKills: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "nodeagent_kernel_oom_kills_total",
			Help: "Kills by the kernel's OOM killer anywhere on the node, from the kernel log, by constraint (CONSTRAINT_MEMCG: a cgroup limit; CONSTRAINT_NONE: the node ran out)."},
			[]string{"constraint"}),
		apiRequests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rest_client_requests_total",
			Help: "Number of HTTP requests to the API server, partitioned by status code, method, and host."},
			[]string{"code", "method", "host"}),
	}
}

// apiRequest counts one request to the API server (cluster.Connection.Observe).
func (m *nodeMetrics) apiRequest(method, host, code string) {
	m.apiRequests.WithLabelValues(code, method, host).Inc()
}

// runtimeCall records one CRI call (cri.Options.Observe).
func (m *nodeMetrics) runtimeCall(operation string, took time.Duration, err error) {
	m.runtimeDuration.WithLabelValues(operation).Observe(took.Seconds())
	if err != nil {
		m.runtimeErrors.WithLabelValues(operation).Inc()
	}
}

func (m *nodeMetrics) podStarted(total, sli time.Duration) {
	m.podStart.Observe(total.Seconds())
	m.podStartSLI.Observe(sli.Seconds())
}

// registry gathers every metric /metrics serves: the node's, the given
// components' (probes, eviction), the running pods and containers as the
// last relist saw them, and the Go runtime's and process's own.
func (m *nodeMetrics) registry(cache *pleg.Cache, components ...prometheus.Collector) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(m.relist, m.podStart, m.podStartSLI, m.runtimeDuration, m.runtimeErrors, m.kernelOOMKills, m.apiRequests)
	reg.MustRegister(components...)
	reg.MustRegister(runningCollector{cache}, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

var (
	runningPodsDesc = prometheus.NewDesc("kubelet_running_pods",
		"Number of pods that have a running pod sandbox.", nil, nil)
	runningContainersDesc = prometheus.NewDesc("kubelet_running_containers",
		"Number of containers currently running, by state.", []string{"container_state"}, nil)
)

// runningCollector reads the counts from the relist cache at scrape time.
type runningCollector struct{ cache *pleg.Cache }

func (c runningCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- runningPodsDesc
	ch <- runningContainersDesc
}

func (c runningCollector) Collect(ch chan<- prometheus.Metric) {
	pods, containers := c.cache.Running()
	ch <- prometheus.MustNewConstMetric(runningPodsDesc, prometheus.GaugeValue, float64(pods))
	for state, n := range containers {
		ch <- prometheus.MustNewConstMetric(runningContainersDesc, prometheus.GaugeValue, float64(n), state)
	}
}
