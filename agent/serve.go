package agent

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"

	"nodeagent/agent/certificates"
	"nodeagent/agent/cluster"
	"nodeagent/agent/pods"
	"nodeagent/agent/server"
	"nodeagent/agent/source"
	"nodeagent/agent/status"
	"nodeagent/api"
	"nodeagent/cgroups"
	"nodeagent/internal/control"
	"nodeagent/manifest"
)

// buildServers builds the read-only API, the kubelet server and the
// control socket's server for the listeners build opened.
func (a *Agent) buildServers(_ context.Context, p *parts) error {
	cfg := a.cfg
	var summary func(context.Context) (any, error)
	var resourceMetrics, cadvisorMetrics prometheus.Gatherer
	if p.stats != nil {
		summary = func(ctx context.Context) (any, error) { return p.stats.Summary(ctx) }
		resourceMetrics, cadvisorMetrics = gatherer(p.stats.ResourceMetrics()), gatherer(p.stats.CadvisorMetrics())
	}
	src := server.Sources{
		Pods:            p.store.List,
		Events:          p.recorder.List,
		Node:            func() *corev1.Node { return p.nodeStatus.Node(a.opts.Clock.Now()) },
		Config:          a.configz,
		Agent:           map[string]string{"controlSocket": a.opts.ControlSocket},
		Probes:          func(uid types.UID) any { return p.prober.Reports(uid) },
		Metrics:         p.metrics.registry(p.cache, append([]prometheus.Collector{p.prober.Metrics, p.evictor.Metrics, p.imageGC.Metrics()}, append(p.cpuMetrics(), append(p.shutdownMetrics(), p.podRes)...)...)...),
		Summary:         summary,
		ResourceMetrics: resourceMetrics,
		CadvisorMetrics: cadvisorMetrics,
		ProbeMetrics:    gatherer(p.prober.Metrics.PerContainer()),
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
		CPUs:    func() any { return cpuManagerView(p.cpus, p.store) },
	}
	if p.api != nil {
		p.api.srv = server.NewServer(p.apiAddr, server.Handler(src))
	}
	if p.healthz != nil {
		p.healthz.srv = server.NewServer(p.healthz.l.Addr().String(), server.HealthzHandler(src.Checks))
	}
	if p.kubelet != nil {
		if err := a.buildKubeletServer(p, src); err != nil {
			return err
		}
	}
	if p.control != nil {
		p.control.srv = server.NewServer(a.opts.ControlSocket, server.ControlHandler(server.ControlSources{
			Control: controlOps{p.manager, p.files},
			Pods:    p.store.List,
			Config: func() any {
				return map[string]any{"kubeletconfig": a.configz(), "nodeagent": map[string]string{"controlSocket": a.opts.ControlSocket}}
			},
			IsNotFound: func(err error) bool { return errors.Is(err, pods.ErrPodNotFound) },
			IsInvalid:  func(err error) bool { return errors.Is(err, source.ErrInvalidManifest) },
			IsRefused: func(err error) bool {
				return errors.Is(err, errNotStatic) || errors.Is(err, source.ErrNotManifest)
			},
			MaxManifest: manifest.MaxManifestSize,
			UID:         uint32(os.Geteuid()),
		}))
		p.control.srv.ConnContext = control.ConnContext
	}
	return nil
}

// serve runs s until it is shut down.
func (a *Agent) serve(s *served, what string) {
	if err := s.srv.Serve(s.l); err != nil && !errors.Is(err, http.ErrServerClosed) {
		a.log.Error(what+" stopped", "err", err)
	}
}

// stopServers ends the read-only API and the kubelet server (in-flight
// requests get 5 s) and the control socket, and removes the socket file.
func (a *Agent) stopServers(p *parts) {
	for _, s := range []*served{p.api, p.healthz, p.kubelet} {
		if s != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			s.srv.Shutdown(ctx)
			cancel()
		}
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

// errNotStatic is a pod DeletePod refuses: it did not come from a
// manifest file, so removing a file cannot delete it.
var errNotStatic = errors.New("not a static pod")

// DeletePod deletes a static pod through its source, which removes its
// manifest and sends the desired set without it, with the grace override:
// the pod manager stops it as it stops any pod that left its source.
func (c controlOps) DeletePod(ctx context.Context, namespace, name string, grace *int64) error {
	err := c.files.Delete(ctx, namespace, name, grace)
	if !errors.Is(err, source.ErrNoManifest) {
		return err
	}
	if _, ok := c.manager.Named(namespace, name); ok {
		return fmt.Errorf("pod %s/%s comes from the API server, not a manifest file: %w; delete it with kubectl delete", namespace, name, errNotStatic)
	}
	return fmt.Errorf("pod %s/%s: %w", namespace, name, pods.ErrPodNotFound)
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

// buildKubeletServer builds the authenticated server on port: TLS with
// the configured key pair or a self-signed one under the root dir,
// authentication and authorization as the config says, the webhooks
// asking the API server the node joined.
func (a *Agent) buildKubeletServer(p *parts, src server.Sources) error {
	cfg, log := a.cfg, a.log.With("component", "kubelet-server")
	ciphers, err := cfg.TLSCipherSuites()
	if err != nil {
		return err
	}
	getCert, err := a.servingCertificate(p)
	if err != nil {
		return fmt.Errorf("kubelet server: %w", err)
	}
	tlsCfg := server.TLSConfig(getCert, cfg.TLSMinVersion(), ciphers, cfg.TLSCurves())
	reviews := clusterReviews{p.cluster.node}
	authn := &server.Authenticator{Anonymous: cfg.AnonymousAuthentication(), CacheTTL: cfg.Authentication.Webhook.CacheTTL.Duration, Clock: a.opts.Clock}
	if f := cfg.Authentication.X509.ClientCAFile; f != "" {
		if authn.ClientCAs, err = server.ClientCAs(f); err != nil {
			return err
		}
	}
	if cfg.WebhookAuthentication() {
		authn.Reviews = reviews
	}
	var authz server.Authorizer = server.AlwaysAllow{}
	if cfg.Authorization.Mode == kubeletv1beta1.KubeletAuthorizationModeWebhook {
		authz = &server.WebhookAuthorizer{Reviews: reviews, AllowedTTL: cfg.Authorization.Webhook.CacheAuthorizedTTL.Duration,
			DeniedTTL: cfg.Authorization.Webhook.CacheUnauthorizedTTL.Duration, Clock: a.opts.Clock}
	}
	h := server.KubeletHandler(server.KubeletSources{
		Sources: src,
		Pod:     p.store.Named,
		Sandbox: func(uid types.UID) string {
			if sb := p.cache.Get(uid).LatestSandbox(); sb != nil && sb.State == runtimeapi.PodSandboxState_SANDBOX_READY {
				return sb.Id
			}
			return ""
		},
		Runtime: p.rt,
		Log:     log,
	})
	addr := net.JoinHostPort(cfg.Address, strconv.Itoa(int(cfg.Port)))
	p.kubelet.srv = server.NewServer(addr, server.Guard(h, a.opts.NodeName, authn, authz, log))
	p.kubelet.l = tls.NewListener(p.kubelet.l, tlsCfg)
	if ip := net.ParseIP(cfg.Address); ip.IsLoopback() && !net.ParseIP(p.nodeIP).IsLoopback() {
		log.Warn("the kubelet server listens on loopback, but the API server reaches it at the node's IP: kubectl logs, exec and port-forward will fail; set address to 0.0.0.0 or the node IP", "addr", addr, "node_ip", p.nodeIP)
	}
	return nil
}

// servingCertificate is the kubelet server's certificate: the configured
// files, one the cluster signs (serverTLSBootstrap, none served until it
// is issued, as the kubelet), or a self-signed one under the root dir.
func (a *Agent) servingCertificate(p *parts) (func(*tls.ClientHelloInfo) (*tls.Certificate, error), error) {
	cfg := a.cfg
	ips := []net.IP{net.ParseIP(p.nodeIP)}
	certDir := a.certDir()
	switch {
	case cfg.TLSCertFile != "":
		return server.FileCertificate(cfg.TLSCertFile, cfg.TLSPrivateKeyFile)
	case cfg.ServerTLSBootstrap:
		m, err := certificates.ServingManager(certDir, a.opts.NodeName, ips, p.cluster.node.Client, p.metrics.serverRenewErrors)
		if err != nil {
			return nil, err
		}
		p.metrics.serverCert = m.Current
		m.Start()
		p.closers = append(p.closers, m.Stop)
		return func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			if c := m.Current(); c != nil {
				return c, nil
			}
			return nil, errors.New("no serving certificate available for the kubelet: the CSR is not approved and signed yet")
		}, nil
	}
	certFile, keyFile, err := server.SelfSigned(certDir, a.opts.NodeName, ips, a.opts.Clock.Now())
	if err != nil {
		return nil, fmt.Errorf("self-signed certificate: %w", err)
	}
	return server.FileCertificate(certFile, keyFile)
}

// clusterReviews asks the API server the node joined (waiting for the
// join within the caller's deadline).
type clusterReviews struct{ c *cluster.Cluster }

func (r clusterReviews) TokenReview(ctx context.Context, tr *authenticationv1.TokenReview) (*authenticationv1.TokenReview, error) {
	client, _, err := r.c.ReviewClients(ctx)
	if err != nil {
		return nil, fmt.Errorf("not joined to the API server yet: %w", err)
	}
	return client.AuthenticationV1().TokenReviews().Create(ctx, tr, metav1.CreateOptions{})
}

func (r clusterReviews) SubjectAccessReview(ctx context.Context, sar *authorizationv1.SubjectAccessReview) (*authorizationv1.SubjectAccessReview, error) {
	_, client, err := r.c.ReviewClients(ctx)
	if err != nil {
		return nil, fmt.Errorf("not joined to the API server yet: %w", err)
	}
	return client.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
}
