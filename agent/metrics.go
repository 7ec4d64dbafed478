package agent

import (
	"crypto/tls"
	"crypto/x509"
	"math"
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
	nodeName        string
	relist          prometheus.Histogram
	relistInterval  prometheus.Histogram
	podWorker       *prometheus.HistogramVec
	runtimeOps      *prometheus.CounterVec
	podStart        prometheus.Histogram
	podStartSLI     prometheus.Histogram
	runtimeDuration *prometheus.HistogramVec
	runtimeErrors   *prometheus.CounterVec
	kernelOOMKills  *prometheus.CounterVec
	apiRequests     *prometheus.CounterVec
	preemptions     *prometheus.CounterVec
	// Sandboxes created and failed, of all pods and of user-namespaced ones.
	startedPods, startedPodsErrors             prometheus.Counter
	startedUsernsPods, startedUsernsPodsErrors prometheus.Counter

	// The certificates the agent holds (nil until one is managed) and the
	// renewals that failed.
	clientCert, serverCert               func() *tls.Certificate
	clientRenewErrors, serverRenewErrors prometheus.Counter
}

func newNodeMetrics(nodeName string) *nodeMetrics {
	return &nodeMetrics{
		nodeName: nodeName,
		relist: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "kubelet_pleg_relist_duration_seconds",
			Help: "Duration in seconds for relisting pods in PLEG.", Buckets: prometheus.DefBuckets}),
		relistInterval: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "kubelet_pleg_relist_interval_seconds",
			Help: "Interval in seconds between relisting in PLEG.", Buckets: prometheus.DefBuckets}),
		podWorker: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "kubelet_pod_worker_duration_seconds",
			Help: "Duration in seconds to sync a single pod. Broken down by operation type: create, update, sync or kill.", Buckets: prometheus.DefBuckets},
			[]string{"operation_type"}),
		runtimeOps: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kubelet_runtime_operations_total",
			Help: "Cumulative number of runtime operations by operation type."}, []string{"operation_type"}),
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
		preemptions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kubelet_preemptions",
			Help: "Cumulative number of pod preemptions by preemption resource"}, []string{"preemption_signal"}),
		startedPods: prometheus.NewCounter(prometheus.CounterOpts{Name: "kubelet_started_pods_total",
			Help: "Cumulative number of pods started"}),
		startedPodsErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "kubelet_started_pods_errors_total",
			Help: "Cumulative number of errors when starting pods"}),
		startedUsernsPods: prometheus.NewCounter(prometheus.CounterOpts{Name: "kubelet_started_user_namespaced_pods_total",
			Help: "Cumulative number of pods with user namespaces started"}),
		startedUsernsPodsErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "kubelet_started_user_namespaced_pods_errors_total",
			Help: "Cumulative number of errors when starting pods with user namespaces. This does not consider errors when user namespaces are not supported."}),
		clientRenewErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "kubelet_certificate_manager_client_expiration_renew_errors",
			Help: "Counter of certificate renewal errors."}),
		serverRenewErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "kubelet_server_expiration_renew_errors",
			Help: "Counter of certificate renewal errors."}),
	}
}

// podSynced records one pod worker pass (pods.Deps.PodSynced).
func (m *nodeMetrics) podSynced(operation string, took time.Duration) {
	m.podWorker.WithLabelValues(operation).Observe(took.Seconds())
}

// preempted counts one pod stopped to admit a critical pod
// (pods.Deps.Preempted).
func (m *nodeMetrics) preempted(signal string) {
	m.preemptions.WithLabelValues(signal).Inc()
}

// apiRequest counts one request to the API server (cluster.Connection.Observe).
func (m *nodeMetrics) apiRequest(method, host, code string) {
	m.apiRequests.WithLabelValues(code, method, host).Inc()
}

// runtimeCall records one CRI call (cri.Options.Observe).
func (m *nodeMetrics) runtimeCall(operation string, took time.Duration, err error) {
	m.runtimeOps.WithLabelValues(operation).Inc()
	m.runtimeDuration.WithLabelValues(operation).Observe(took.Seconds())
	if err != nil {
		m.runtimeErrors.WithLabelValues(operation).Inc()
	}
}

// sandboxCreated counts one sandbox creation as the kubelet's SyncPod
// does (pods.Deps.SandboxCreated).
func (m *nodeMetrics) sandboxCreated(userNamespaced, sandboxFailed, syncFailed bool) {
	m.startedPods.Inc()
	if sandboxFailed {
		m.startedPodsErrors.Inc()
	}
	if userNamespaced {
		m.startedUsernsPods.Inc()
		if syncFailed {
			m.startedUsernsPodsErrors.Inc()
		}
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
	reg.MustRegister(m.relist, m.relistInterval, m.podWorker, m.podStart, m.podStartSLI, m.runtimeOps, m.runtimeDuration, m.runtimeErrors,
		m.kernelOOMKills, m.apiRequests, m.preemptions, m.clientRenewErrors, m.serverRenewErrors,
		m.startedPods, m.startedPodsErrors, m.startedUsernsPods, m.startedUsernsPodsErrors)
	reg.MustRegister(nodeNameCollector(m.nodeName), certTTLCollector{m})
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

var (
	nodeNameDesc = prometheus.NewDesc("kubelet_node_name",
		"The node's name. The count is always 1.", []string{"node"}, nil)
	clientTTLDesc = prometheus.NewDesc("kubelet_certificate_manager_client_ttl_seconds",
		"Gauge of the TTL (time-to-live) of the Kubelet's client certificate. The value is in seconds until certificate expiry (negative if already expired). If client certificate is invalid or unused, the value will be +INF.", nil, nil)
	serverTTLDesc = prometheus.NewDesc("kubelet_certificate_manager_server_ttl_seconds",
		"Gauge of the shortest TTL (time-to-live) of the Kubelet's serving certificate. The value is in seconds until certificate expiry (negative if already expired). If serving certificate is invalid or unused, the value will be +INF.", nil, nil)
)

// nodeNameCollector is kubelet_node_name: the series dashboards and the
// kubernetes-mixin alerts join on to name the node.
type nodeNameCollector string

func (c nodeNameCollector) Describe(ch chan<- *prometheus.Desc) { ch <- nodeNameDesc }

func (c nodeNameCollector) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(nodeNameDesc, prometheus.GaugeValue, 1, string(c))
}

// certTTLCollector reads the certificates' lifetimes at scrape time.
type certTTLCollector struct{ m *nodeMetrics }

func (c certTTLCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- clientTTLDesc
	ch <- serverTTLDesc
}

func (c certTTLCollector) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(clientTTLDesc, prometheus.GaugeValue, certTTL(c.m.clientCert))
	ch <- prometheus.MustNewConstMetric(serverTTLDesc, prometheus.GaugeValue, certTTL(c.m.serverCert))
}

// certTTL is the seconds until the certificate expires; +Inf when none is
// managed, as the kubelet reports an unused one.
func certTTL(current func() *tls.Certificate) float64 {
	if current == nil {
		return math.Inf(1)
	}
	cert := current()
	if cert == nil || len(cert.Certificate) == 0 {
		return math.Inf(1)
	}
	leaf := cert.Leaf
	if leaf == nil {
		var err error
		if leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return math.Inf(1)
		}
	}
	return time.Until(leaf.NotAfter).Seconds()
}
