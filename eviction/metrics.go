package eviction

import (
	"fmt"
	"io"
	"sort"
	"sync"
	"time"

	"nodeagent/internal/metrics"
)

// Metrics are eviction's counters and latency histograms.
type Metrics struct {
	mu        sync.Mutex
	evictions map[Signal]uint64
	// Detection: kernel notification -> the manager awake; decision: awake
	// -> victims chosen; kill: chosen -> kills sent; reclaim: kills sent ->
	// every victim drained.
	Detection, Decision, Kill, Reclaim *metrics.Histogram
}

func newMetrics() *Metrics {
	return &Metrics{
		evictions: map[Signal]uint64{},
		Detection: metrics.NewHistogram(metrics.LatencyBuckets), Decision: metrics.NewHistogram(metrics.LatencyBuckets),
		Kill: metrics.NewHistogram(metrics.LatencyBuckets), Reclaim: metrics.NewHistogram(metrics.LatencyBuckets),
	}
}

func (m *Metrics) decided(t *Trace) {
	if !t.TriggeredAt.IsZero() {
		m.Detection.Observe(t.WokeAt.Sub(t.TriggeredAt).Seconds())
	}
	m.Decision.Observe(t.DecidedAt.Sub(t.WokeAt).Seconds())
	m.Kill.Observe(t.KillSentAt.Sub(t.DecidedAt).Seconds())
	m.mu.Lock()
	m.evictions[t.Signal] += uint64(len(t.Victims))
	m.mu.Unlock()
}

func (m *Metrics) freed(d time.Duration) { m.Reclaim.Observe(d.Seconds()) }

// WriteText writes the metrics in the Prometheus text format.
func (m *Metrics) WriteText(w io.Writer) {
	metrics.Header(w, "kubelet_evictions", "counter", "Pods evicted, by eviction signal.")
	m.mu.Lock()
	signals := make([]string, 0, len(m.evictions))
	for s := range m.evictions {
		signals = append(signals, string(s))
	}
	sort.Strings(signals)
	for _, s := range signals {
		fmt.Fprintf(w, "kubelet_evictions{eviction_signal=%q} %d\n", s, m.evictions[Signal(s)])
	}
	m.mu.Unlock()
	for _, h := range []struct {
		name, help string
		h          *metrics.Histogram
	}{
		{"nodeagent_eviction_detection_seconds", "Kernel notification (memcg threshold or OOM, memory.high tripwire, PSI trigger, OOM kill) to the eviction manager awake.", m.Detection},
		{"nodeagent_eviction_decision_seconds", "Eviction manager awake to victims chosen.", m.Decision},
		{"nodeagent_eviction_kill_seconds", "Victims chosen to kills sent.", m.Kill},
		{"nodeagent_eviction_reclaim_seconds", "Kills sent to every victim drained.", m.Reclaim},
	} {
		metrics.Header(w, h.name, "histogram", h.help)
		h.h.Write(w, h.name, "")
	}
}
