package probes

import (
	"fmt"
	"io"
	"sort"
	"sync"
	"time"
)

// durationBuckets are the upper bounds of prober_probe_duration_seconds.
var durationBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// Metrics counts probe runs by type and result and their durations, in the
// kubelet's metric names, ready for the Prometheus text format. Labels are
// limited to probe_type and result so that the series count does not grow
// with the number of pods.
type Metrics struct {
	mu     sync.Mutex
	total  map[[2]string]uint64 // probe_type, result
	missed map[string]uint64    // probe_type
	hist   map[string]*histogram
}

type histogram struct {
	counts []uint64 // per bucket, not cumulative
	sum    float64
	count  uint64
}

// NewMetrics returns empty metrics.
func NewMetrics() *Metrics {
	return &Metrics{total: map[[2]string]uint64{}, missed: map[string]uint64{}, hist: map[string]*histogram{}}
}

func (m *Metrics) observe(kind Kind, r Result, took time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.total[[2]string{string(kind), r.String()}]++
	h := m.hist[string(kind)]
	if h == nil {
		h = &histogram{counts: make([]uint64, len(durationBuckets))}
		m.hist[string(kind)] = h
	}
	s := took.Seconds()
	for i, b := range durationBuckets {
		if s <= b {
			h.counts[i]++
			break
		}
	}
	h.sum += s
	h.count++
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
	fmt.Fprintln(w, "# HELP prober_probe_total Cumulative number of liveness, readiness or startup probe runs, by result.")
	fmt.Fprintln(w, "# TYPE prober_probe_total counter")
	keys := make([][2]string, 0, len(m.total))
	for k := range m.total {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i][0]+keys[i][1] < keys[j][0]+keys[j][1] })
	for _, k := range keys {
		fmt.Fprintf(w, "prober_probe_total{probe_type=%q,result=%q} %d\n", k[0], k[1], m.total[k])
	}
	fmt.Fprintln(w, "# HELP prober_probe_duration_seconds Duration of liveness, readiness or startup probe runs.")
	fmt.Fprintln(w, "# TYPE prober_probe_duration_seconds histogram")
	kinds := make([]string, 0, len(m.hist))
	for k := range m.hist {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		h := m.hist[k]
		var cum uint64
		for i, b := range durationBuckets {
			cum += h.counts[i]
			fmt.Fprintf(w, "prober_probe_duration_seconds_bucket{probe_type=%q,le=\"%g\"} %d\n", k, b, cum)
		}
		fmt.Fprintf(w, "prober_probe_duration_seconds_bucket{probe_type=%q,le=\"+Inf\"} %d\n", k, h.count)
		fmt.Fprintf(w, "prober_probe_duration_seconds_sum{probe_type=%q} %g\n", k, h.sum)
		fmt.Fprintf(w, "prober_probe_duration_seconds_count{probe_type=%q} %d\n", k, h.count)
	}
	fmt.Fprintln(w, "# HELP nodeagent_prober_missed_periods_total Probe periods skipped because the previous run was still in flight.")
	fmt.Fprintln(w, "# TYPE nodeagent_prober_missed_periods_total counter")
	for _, k := range []Kind{Liveness, Readiness, Startup} {
		fmt.Fprintf(w, "nodeagent_prober_missed_periods_total{probe_type=%q} %d\n", k, m.missed[string(k)])
	}
}
