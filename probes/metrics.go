package probes

import (
	"fmt"
	"io"
	"sort"
	"sync"
	"time"

	"nodeagent/internal/metrics"
)

// Metrics counts probe runs by type and result and their durations, in the
// kubelet's metric names, ready for the Prometheus text format. Labels are
// limited to probe_type and result so that the series count does not grow
// with the number of pods.
type Metrics struct {
	mu     sync.Mutex
	total  map[[2]string]uint64 // probe_type, result
	missed map[string]uint64    // probe_type
	hist   map[string]*metrics.Histogram
}

// NewMetrics returns empty metrics.
func NewMetrics() *Metrics {
	return &Metrics{total: map[[2]string]uint64{}, missed: map[string]uint64{}, hist: map[string]*metrics.Histogram{}}
}

func (m *Metrics) observe(kind Kind, r Result, took time.Duration) {
	m.mu.Lock()
	m.total[[2]string{string(kind), r.String()}]++
	h := m.hist[string(kind)]
	if h == nil {
		h = metrics.NewHistogram(metrics.LatencyBuckets)
		m.hist[string(kind)] = h
	}
	m.mu.Unlock()
	h.Observe(took.Seconds())
}

func (m *Metrics) addMissed(kind Kind) {
	m.mu.Lock()
	m.missed[string(kind)]++
	m.mu.Unlock()
}

// Total is the number of runs of a probe type with a result.
func (m *Metrics) Total(kind Kind, r Result) uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.total[[2]string{string(kind), r.String()}]
}

// Missed is the number of periods a probe type skipped because the
// previous run had not finished.
func (m *Metrics) Missed(kind Kind) uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.missed[string(kind)]
}

// WriteText writes the metrics in the Prometheus text exposition format.
func (m *Metrics) WriteText(w io.Writer) {
	m.mu.Lock()
	defer m.mu.Unlock()
	metrics.Header(w, "prober_probe_total", "counter", "Cumulative number of liveness, readiness or startup probe runs, by result.")
	keys := make([][2]string, 0, len(m.total))
	for k := range m.total {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i][0]+keys[i][1] < keys[j][0]+keys[j][1] })
	for _, k := range keys {
		fmt.Fprintf(w, "prober_probe_total{probe_type=%q,result=%q} %d\n", k[0], k[1], m.total[k])
	}
	metrics.Header(w, "prober_probe_duration_seconds", "histogram", "Duration of liveness, readiness or startup probe runs.")
	kinds := make([]string, 0, len(m.hist))
	for k := range m.hist {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		m.hist[k].Write(w, "prober_probe_duration_seconds", fmt.Sprintf("probe_type=%q", k))
	}
	metrics.Header(w, "nodeagent_prober_missed_periods_total", "counter", "Probe periods skipped because the previous run was still in flight.")
	for _, k := range []Kind{Liveness, Readiness, Startup} {
		fmt.Fprintf(w, "nodeagent_prober_missed_periods_total{probe_type=%q} %d\n", k, m.missed[string(k)])
	}
}
