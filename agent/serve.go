package agent

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"nodeagent/agent/pods"
	"nodeagent/agent/server"
	"nodeagent/agent/source"
	"nodeagent/agent/status"
	"nodeagent/api"
	"nodeagent/cgroups"
	"nodeagent/internal/control"
	"nodeagent/manifest"
)

// buildServers builds the read-only API and the control socket's server
// for the listeners build opened.
func (a *Agent) buildServers(p *parts, apiAddr string) {
	cfg := a.cfg
	if p.api != nil {
		var summary func(context.Context) (any, error)
		var resourceMetrics, cadvisorMetrics prometheus.Gatherer
		if p.stats != nil {
			summary = func(ctx context.Context) (any, error) { return p.stats.Summary(ctx) }
			resourceMetrics, cadvisorMetrics = gatherer(p.stats.ResourceMetrics()), gatherer(p.stats.CadvisorMetrics())
		}
		p.api.srv = server.NewServer(apiAddr, server.Handler(server.Sources{
			Pods:            p.store.List,
			Events:          p.recorder.List,
			Node:            func() *corev1.Node { return p.nodeStatus.Node(a.opts.Clock.Now()) },
			Config:          a.configz,
			Agent:           map[string]string{"controlSocket": a.opts.ControlSocket},
			Probes:          func(uid types.UID) any { return p.prober.Reports(uid) },
			Metrics:         p.metrics.registry(p.cache, p.prober.Metrics, p.evictor.Metrics),
			Summary:         summary,
			ResourceMetrics: resourceMetrics,
			CadvisorMetrics: cadvisorMetrics,
			Profiling:       cfg.EnableProfilingHandler != nil && *cfg.EnableProfilingHandler,
			Evictions:       func() any { return p.evictor.Traces() },
			Checks: append([]server.HealthCheck{
				{Name: "runtime", Check: func() error {
					if err := p.nodeStatus.RuntimeError(); err != "" {
						return fmt.Errorf("container runtime at %s is down: %s", cfg.ContainerRuntimeEndpoint, err)
					}
					return nil
				}},
				{Name: "pleg", Check: p.cache.Healthy},
				{Name: "cgroups", Check: p.tree.Healthy},
				{Name: "eviction", Check: p.evictor.Healthy},
			}, p.clusterChecks()...),
			Cgroups: func() (any, error) { return cgroupTree(p.tree, p.store) },
		}))
	}
	if p.control != nil {
		p.control.srv = server.NewServer(a.opts.ControlSocket, server.ControlHandler(server.ControlSources{
			Control: controlOps{p.manager, p.files},
			Config: func() any {
				return map[string]any{"kubeletconfig": a.configz(), "nodeagent": map[string]string{"controlSocket": a.opts.ControlSocket}}
			},
			IsNotFound:  func(err error) bool { return errors.Is(err, pods.ErrPodNotFound) },
			IsInvalid:   func(err error) bool { return errors.Is(err, source.ErrInvalidManifest) },
			MaxManifest: manifest.MaxManifestSize,
			UID:         uint32(os.Geteuid()),
		}))
		p.control.srv.ConnContext = control.ConnContext
	}
}

// serve runs s until it is shut down.
func (a *Agent) serve(s *served, what string) {
	if err := s.srv.Serve(s.l); err != nil && !errors.Is(err, http.ErrServerClosed) {
		a.log.Error(what+" stopped", "err", err)
	}
}

// stopServers ends the API (in-flight requests get 5 s) and the control
// socket, and removes the socket file.
func (a *Agent) stopServers(p *parts) {
	if p.api != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		p.api.srv.Shutdown(ctx)
		cancel()
	}
	if p.control != nil {
		p.control.srv.Close()
		os.Remove(a.opts.ControlSocket)
	}
}

// controlOps is what the control socket acts on: the pod manager and the
// static pod directory.
type controlOps struct {
	manager *pods.Manager
	files   *source.File
}

func (c controlOps) DeletePod(namespace, name string, grace *int64) error {
	return c.manager.DeletePod(namespace, name, grace)
}

func (c controlOps) ApplyManifest(data []byte) (api.ManifestResult, error) {
	name, file, result, err := c.files.Apply(data)
	return api.ManifestResult{Name: name, File: file, Result: result}, err
}

// cgroupTree is /cgroups: the QoS tree with each cgroup's values.
func cgroupTree(tree *cgroups.Tree, store *status.Store) ([]cgroups.TreeEntry, error) {
	entries, err := tree.Inspect()
	for i, e := range entries {
		if pod, ok := store.Get(e.PodUID); ok && e.PodUID != "" {
			entries[i].Pod, entries[i].QOS = pod.Namespace+"/"+pod.Name, string(pod.Status.QOSClass)
		}
	}
	return entries, err
}

// gatherer is a registry holding one collector.
func gatherer(c prometheus.Collector) prometheus.Gatherer {
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	return reg
}

// clusterChecks are /healthz's API-server checks: failing while the node
// cannot reach the API server (the static pods run on regardless).
func (p *parts) clusterChecks() []server.HealthCheck {
	if p.cluster == nil {
		return nil
	}
	return []server.HealthCheck{{Name: "apiserver", Check: p.cluster.node.Healthy}}
}
