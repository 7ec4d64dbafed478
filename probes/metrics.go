package probes

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"nodeagent/internal/metrics"
)

// Metrics counts probe runs by type and result and their durations, in the
// kubelet's metric names. Labels are limited to probe_type and result so
// that the series count does not grow with the number of pods. It is a
// prometheus.Collector.
type Metrics struct {
	total    *prometheus.CounterVec
	duration *prometheus.HistogramVec
	missed   *prometheus.CounterVec
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
