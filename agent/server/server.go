// Package server is the agent's local read-only API, on the kubelet's
// read-only port: /healthz and /pods as the kubelet serves them, plus
// /node (the node object), /events (the agent's events) and /configz (the
// configuration in effect).
package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Sources are what the API serves.
type Sources struct {
	Pods    func() []corev1.Pod
	Events  func() []corev1.Event
	Node    func() *corev1.Node
	Config  any
	Agent   any          // nodeagent's own settings, beside the kubelet config in /configz
	Healthy func() error // nil error: healthy
	// Probes reports a pod's probes (results, last run); nil: none.
	Probes func(uid types.UID) any
	// Metrics gathers what /metrics serves in the Prometheus formats;
	// nil: no /metrics.
	Metrics prometheus.Gatherer
	// Evictions lists the eviction decisions; nil: none.
	Evictions func() any
	// Profiling serves Go's pprof under /debug/pprof/ (enableProfilingHandler).
	Profiling bool
}

// Handler returns the API's HTTP handler.
func Handler(src Sources) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		if err := src.Healthy(); err != nil {
			http.Error(w, "unhealthy: "+err.Error(), http.StatusInternalServerError)
			return
		}
		w.Write([]byte("ok"))
	})
	mux.HandleFunc("GET /pods", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, &corev1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"}, Items: src.Pods()})
	})
	mux.HandleFunc("GET /events", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, &corev1.EventList{TypeMeta: metav1.TypeMeta{Kind: "EventList", APIVersion: "v1"}, Items: src.Events()})
	})
	mux.HandleFunc("GET /node", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, src.Node())
	})
	mux.HandleFunc("GET /pods/{namespace}/{name}/probes", func(w http.ResponseWriter, r *http.Request) {
		for _, p := range src.Pods() {
			if p.Namespace == r.PathValue("namespace") && p.Name == r.PathValue("name") {
				var reports any = []any{}
				if src.Probes != nil {
					if got := src.Probes(p.UID); got != nil {
						reports = got
					}
				}
				writeJSON(w, reports)
				return
			}
		}
		http.Error(w, fmt.Sprintf("pod %s/%s not found", r.PathValue("namespace"), r.PathValue("name")), http.StatusNotFound)
	})
	mux.HandleFunc("GET /evictions", func(w http.ResponseWriter, r *http.Request) {
		var traces any = []any{}
		if src.Evictions != nil {
			traces = src.Evictions()
		}
		writeJSON(w, traces)
	})
	if src.Metrics != nil {
		mux.Handle("GET /metrics", promhttp.HandlerFor(src.Metrics, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}))
	}
	if src.Profiling {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	mux.HandleFunc("GET /configz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, map[string]any{"kubeletconfig": src.Config, "nodeagent": src.Agent})
	})
	return mux
}

// NewServer returns an http.Server for addr with sane timeouts.
func NewServer(addr string, h http.Handler) *http.Server {
	return &http.Server{Addr: addr, Handler: h, ReadHeaderTimeout: 5 * time.Second, WriteTimeout: 30 * time.Second}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
	}
}
