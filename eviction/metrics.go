package eviction

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"nodeagent/internal/metrics"
)

// Metrics are eviction's counters and latency histograms. It is a
// prometheus.Collector.
type Metrics struct {
	evictions *prometheus.CounterVec
	// Detection: kernel notification -> the manager awake; decision: awake
	// -> victims chosen; kill: chosen -> kills sent; reclaim: kills sent ->
	// every victim drained.
	Detection, Decision, Kill, Reclaim prometheus.Histogram
}

// newMetrics starts kubelet_evictions at 0 for each configured signal: the
// kubernetes-mixin's KubeNodeEviction reads the series, and a node that
// never evicted still has it.
func newMetrics(thresholds []Threshold) *Metrics {
	latency := func(name, help string) prometheus.Histogram {
		return prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: metrics.LatencyBuckets})
	}
	m := &Metrics{
		evictions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kubelet_evictions",
			Help: "Pods evicted, by eviction signal."}, []string{"eviction_signal"}),
		Detection: latency("nodeagent_eviction_detection_seconds",
			"Kernel notification (memcg threshold or OOM, memory.high tripwire, PSI trigger, OOM kill) to the eviction manager awake."),
		Decision: latency("nodeagent_eviction_decision_seconds", "Eviction manager awake to victims chosen."),
		Kill:     latency("nodeagent_eviction_kill_seconds", "Victims chosen to kills sent."),
		Reclaim:  latency("nodeagent_eviction_reclaim_seconds", "Kills sent to every victim drained."),
	}
	for _, t := range thresholds {
		m.evictions.WithLabelValues(string(t.Signal))
	}
	return m
}

func (m *Metrics) decided(t *Trace) {
	if !t.TriggeredAt.IsZero() {
		m.Detection.Observe(t.WokeAt.Sub(t.TriggeredAt).Seconds())
	}
	m.Decision.Observe(t.DecidedAt.Sub(t.WokeAt).Seconds())
	m.Kill.Observe(t.KillSentAt.Sub(t.DecidedAt).Seconds())
	m.evictions.WithLabelValues(string(t.Signal)).Add(float64(len(t.Victims)))
}

func (m *Metrics) freed(d time.Duration) { m.Reclaim.Observe(d.Seconds()) }

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	m.evictions.Describe(ch)
	for _, h := range []prometheus.Histogram{m.Detection, m.Decision, m.Kill, m.Reclaim} {
		h.Describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	m.evictions.Collect(ch)
	for _, h := range []prometheus.Histogram{m.Detection, m.Decision, m.Kill, m.Reclaim} {
		h.Collect(ch)
	}
}
