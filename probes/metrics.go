package probes

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"

	"nodeagent/internal/metrics"
)

// Metrics counts probe runs by type and result and their durations, in the
// kubelet's metric names. On /metrics the labels are limited to probe_type
// and result so that the series count does not grow with the number of
// pods; Metrics is that prometheus.Collector. PerContainer is /metrics/probes,
// labelled as the kubelet labels it (container, pod, namespace, pod_uid),
// its series dropped when the pod goes.
type Metrics struct {
	total    *prometheus.CounterVec
	duration *prometheus.HistogramVec
	missed   *prometheus.CounterVec

	podTotal    *prometheus.CounterVec
	podDuration *prometheus.HistogramVec
}

// NewMetrics returns empty metrics.
func NewMetrics() *Metrics {
	m := &Metrics{
		total: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "prober_probe_total",
			Help: "Cumulative number of liveness, readiness or startup probe runs, by result."}, []string{"probe_type", "result"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "prober_probe_duration_seconds",
			Help: "Duration of liveness, readiness or startup probe runs.", Buckets: metrics.LatencyBuckets}, []string{"probe_type"}),
		missed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "nodeagent_prober_missed_periods_total",
			Help: "Probe periods skipped because the previous run was still in flight."}, []string{"probe_type"}),
		podTotal: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "prober_probe_total",
			Help: "Cumulative number of a liveness, readiness or startup probe for a container by result."},
			[]string{"probe_type", "result", "container", "pod", "namespace", "pod_uid"}),
		podDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "prober_probe_duration_seconds",
			Help: "Duration in seconds for a probe response.", Buckets: metrics.LatencyBuckets},
			[]string{"probe_type", "container", "pod", "namespace"}),
	}
	for _, k := range []Kind{Liveness, Readiness, Startup} {
		m.missed.WithLabelValues(string(k)) // zero until a period is missed
	}
	return m
}

func (m *Metrics) observe(kind Kind, r Result, took time.Duration) {
	m.total.WithLabelValues(string(kind), r.String()).Inc()
	m.duration.WithLabelValues(string(kind)).Observe(took.Seconds())
}

// observeContainer records a run in /metrics/probes' series.
func (m *Metrics) observeContainer(kind Kind, r Result, took time.Duration, pod *corev1.Pod, container string) {
	m.podTotal.WithLabelValues(string(kind), r.String(), container, pod.Name, pod.Namespace, string(pod.UID)).Inc()
	m.podDuration.WithLabelValues(string(kind), container, pod.Name, pod.Namespace).Observe(took.Seconds())
}

// forgetPod drops a pod's /metrics/probes series.
func (m *Metrics) forgetPod(pod *corev1.Pod) {
	m.podTotal.DeletePartialMatch(prometheus.Labels{"pod_uid": string(pod.UID)})
	m.podDuration.DeletePartialMatch(prometheus.Labels{"pod": pod.Name, "namespace": pod.Namespace})
}

// PerContainer is the collector of /metrics/probes.
func (m *Metrics) PerContainer() prometheus.Collector { return perContainer{m} }

type perContainer struct{ m *Metrics }

func (c perContainer) Describe(ch chan<- *prometheus.Desc) {
	c.m.podTotal.Describe(ch)
	c.m.podDuration.Describe(ch)
}

func (c perContainer) Collect(ch chan<- prometheus.Metric) {
	c.m.podTotal.Collect(ch)
	c.m.podDuration.Collect(ch)
}

func (m *Metrics) addMissed(kind Kind) { m.missed.WithLabelValues(string(kind)).Inc() }

// Total is the number of runs of a probe type with a result.
func (m *Metrics) Total(kind Kind, r Result) uint64 {
	return uint64(metrics.CounterValue(m.total.WithLabelValues(string(kind), r.String())))
}

// Missed is the number of periods a probe type skipped because the
// previous run had not finished.
func (m *Metrics) Missed(kind Kind) uint64 {
	return uint64(metrics.CounterValue(m.missed.WithLabelValues(string(kind))))
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	m.total.Describe(ch)
	m.duration.Describe(ch)
	m.missed.Describe(ch)
}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	m.total.Collect(ch)
	m.duration.Collect(ch)
	m.missed.Collect(ch)
}
