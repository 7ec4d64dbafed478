// Package server is the agent's local read-only API, on the kubelet's
// read-only port: /healthz and /pods as the kubelet serves them, plus
// /metrics, /metrics/resource, /metrics/cadvisor and /stats/summary in the
// kubelet's formats, /node (the node object), /events (the agent's events)
// and /configz (the configuration in effect).
package server

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/pprof"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"nodeagent/api"
)

// Sources are what the API serves.
type Sources struct {
	Pods   func() []corev1.Pod
	Events func() []corev1.Event
	Node   func() *corev1.Node
	Config func() any // the KubeletConfiguration in effect
	Agent  any        // nodeagent's own settings, beside the kubelet config in /configz
	// Checks are /healthz's components, each also at /healthz/{name}.
	Checks []HealthCheck
	// Probes reports a pod's probes (results, last run); nil: none.
	Probes func(uid types.UID) any
	// Metrics gathers what /metrics serves in the Prometheus formats;
	// nil: no /metrics.
	Metrics prometheus.Gatherer
	// ResourceMetrics, CadvisorMetrics and ProbeMetrics serve
	// /metrics/resource, /metrics/cadvisor and /metrics/probes; nil: not
	// served.
	ResourceMetrics, CadvisorMetrics, ProbeMetrics prometheus.Gatherer
	// Cgroups is /cgroups, the QoS tree's values; nil: not served.
	Cgroups func() (any, error)
	// CPUs is /cpus, the CPU manager's assignments; nil: not served.
	CPUs func() any
	// Summary is /stats/summary (the Summary API); nil: not served.
	Summary func(ctx context.Context) (any, error)
	// Evictions lists the eviction decisions; nil: none.
	Evictions func() any
	// Profiling serves Go's pprof under /debug/pprof/ (enableProfilingHandler).
	Profiling bool
}

// Handler returns the read-only API's HTTP handler.
func Handler(src Sources) http.Handler {
	mux := http.NewServeMux()
	routes(mux, src, Redact)
	return mux
}

// HealthzHandler serves /healthz and /healthz/{check} alone: the kubelet's
// healthz port (healthzBindAddress:healthzPort).
func HealthzHandler(checks []HealthCheck) http.Handler {
	mux := http.NewServeMux()
	healthRoutes(mux, checks)
	return mux
}

// healthRoutes adds /healthz and one path per check.
func healthRoutes(mux *http.ServeMux, checks []HealthCheck) {
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { serveHealth(w, r, checks) })
	mux.HandleFunc("GET /healthz/{check}", func(w http.ResponseWriter, r *http.Request) {
		for _, c := range checks {
			if c.Name == r.PathValue("check") {
				serveHealth(w, r, []HealthCheck{c})
				return
			}
		}
		http.Error(w, "no health check "+r.PathValue("check"), http.StatusNotFound)
	})
}

// routes adds the read-only API's endpoints to mux; /pods serves each pod
// through show.
func routes(mux *http.ServeMux, src Sources, show func(corev1.Pod) corev1.Pod) {
	healthRoutes(mux, src.Checks)
	mux.HandleFunc("GET /pods", func(w http.ResponseWriter, r *http.Request) {
		pods := src.Pods()
		for i := range pods {
			pods[i] = show(pods[i])
		}
		writeJSON(w, &corev1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"}, Items: pods})
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
	for path, g := range map[string]prometheus.Gatherer{
		"/metrics/resource": src.ResourceMetrics, "/metrics/cadvisor": src.CadvisorMetrics, "/metrics/probes": src.ProbeMetrics} {
		if g != nil {
			mux.Handle("GET "+path, promhttp.HandlerFor(g, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}))
		}
	}
	if src.Cgroups != nil {
		mux.HandleFunc("GET /cgroups", func(w http.ResponseWriter, r *http.Request) {
			tree, err := src.Cgroups()
			if err != nil {
				http.Error(w, "cgroups: "+err.Error(), http.StatusInternalServerError)
				return
			}
			writeJSON(w, tree)
		})
	}
	if src.CPUs != nil {
		mux.HandleFunc("GET /cpus", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, src.CPUs()) })
	}
	if src.Summary != nil {
		mux.HandleFunc("GET /stats/summary", func(w http.ResponseWriter, r *http.Request) {
			s, err := src.Summary(r.Context())
			if err != nil {
				http.Error(w, "stats: "+err.Error(), http.StatusInternalServerError)
				return
			}
			writeJSON(w, s)
		})
	}
	if src.Profiling {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	mux.HandleFunc("GET /configz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, map[string]any{"kubeletconfig": src.Config(), "nodeagent": src.Agent})
	})
}

// Redacted replaces a value the read-only API does not serve.
const Redacted = api.Redacted

// secretAnnotations are annotations that copy a pod's spec whole, env
// values included.
var secretAnnotations = []string{corev1.LastAppliedConfigAnnotation}

// Redact hides what a pod may carry as a secret from the unauthenticated
// read-only port: env values, the values of probe and hook HTTP headers,
// and annotations that copy the spec (kubectl's last-applied-
// configuration). Names stay, so a reader still sees the shape. The
// kubelet's read-only port serves them; nodeagent does not.
func Redact(p corev1.Pod) corev1.Pod {
	p.Spec = *p.Spec.DeepCopy()
	for _, k := range secretAnnotations {
		if _, ok := p.Annotations[k]; ok {
			p.Annotations = maps.Clone(p.Annotations)
			p.Annotations[k] = Redacted
		}
	}
	hide := func(c *corev1.Container) {
		for i := range c.Env {
			if c.Env[i].Value != "" {
				c.Env[i].Value = Redacted
			}
		}
		for _, pr := range []*corev1.Probe{c.LivenessProbe, c.ReadinessProbe, c.StartupProbe} {
			if pr != nil {
				hideHeaders(pr.HTTPGet)
			}
		}
		if lc := c.Lifecycle; lc != nil {
			for _, h := range []*corev1.LifecycleHandler{lc.PostStart, lc.PreStop} {
				if h != nil {
					hideHeaders(h.HTTPGet)
				}
			}
		}
	}
	for i := range p.Spec.InitContainers {
		hide(&p.Spec.InitContainers[i])
	}
	for i := range p.Spec.Containers {
		hide(&p.Spec.Containers[i])
	}
	for i := range p.Spec.EphemeralContainers {
		hide((*corev1.Container)(&p.Spec.EphemeralContainers[i].EphemeralContainerCommon))
	}
	return p
}

func hideHeaders(g *corev1.HTTPGetAction) {
	if g == nil {
		return
	}
	for i := range g.HTTPHeaders {
		g.HTTPHeaders[i].Value = Redacted
	}
}

// HealthCheck is one component of /healthz.
type HealthCheck struct {
	Name  string
	Check func() error // nil: healthy
}

// serveHealth answers as the Kubernetes components' healthz does: "ok",
// or 500 listing each check as [+]name ok or [-]name failed: reason (the
// list always with ?verbose).
func serveHealth(w http.ResponseWriter, r *http.Request, checks []HealthCheck) {
	var report strings.Builder
	failed := false
	for _, c := range checks {
		if err := c.Check(); err != nil {
			failed = true
			fmt.Fprintf(&report, "[-]%s failed: %v\n", c.Name, err)
		} else {
			fmt.Fprintf(&report, "[+]%s ok\n", c.Name)
		}
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	switch {
	case failed:
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprint(w, report.String()+"healthz check failed\n")
	case r.URL.Query().Has("verbose"):
		fmt.Fprint(w, report.String()+"healthz check passed\n")
	default:
		fmt.Fprint(w, "ok")
	}
}

// Connection limits: a caller that opens connections and never speaks
// holds one each until the timeouts below free it; past the limit new
// connections wait in the kernel's backlog instead of costing the agent.
const (
	MaxAPIConns     = 256
	MaxControlConns = 16
	// MaxKubeletConns is higher: each exec, attach, port-forward and
	// log follow holds a connection for its whole session. One source
	// address holds at most MaxKubeletConnsPerClient of them
	// (LimitClients): anyone on the network may connect.
	MaxKubeletConns          = 4096
	MaxKubeletConnsPerClient = 512
)

// NewServer returns an http.Server for addr with timeouts on every phase
// (an idle keep-alive is closed after a minute) and a 64 KiB header limit.
// /debug/pprof/profile and trace run for the seconds asked: they are only
// served with enableProfilingHandler.
func NewServer(addr string, h http.Handler) *http.Server {
	return &http.Server{Addr: addr, Handler: h, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: 60 * time.Second, IdleTimeout: time.Minute, MaxHeaderBytes: 64 << 10}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
	}
}
