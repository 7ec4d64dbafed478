package agent

// API-server mode's wiring.

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"

	"nodeagent/agent/certificates"
	"nodeagent/agent/cluster"
	"nodeagent/agent/events"
	"nodeagent/agent/mirror"
	"nodeagent/agent/node"
	"nodeagent/agent/objects"
	"nodeagent/agent/source"
	"nodeagent/agent/status"
)

// clusterParts are API-server mode's components.
type clusterParts struct {
	node    *cluster.Cluster
	pods    *source.API
	status  *status.APISync
	mirrors *mirror.Manager
	events  *events.APISink
	objects *objects.Manager
}

// buildCluster makes API-server mode's components: the connection with
// the node's registration, status and lease, the API pod source, the pod
// status sync and the referenced objects (the mirror pods follow the pod
// manager). None contacts the API server before Run.
func (a *Agent) buildCluster(_ context.Context, p *parts) error {
	cfg, clk := a.cfg, a.opts.Clock
	c := p.cluster
	if c == nil {
		return nil
	}
	qps := float32(50)
	if cfg.KubeAPIQPS != nil {
		qps = float32(*cfg.KubeAPIQPS)
	}
	// The kubelet's eventRecordQPS: 0 means no limit (client-go's is < 0).
	eventQPS := float32(-1)
	if cfg.EventRecordQPS != nil && *cfg.EventRecordQPS > 0 {
		eventQPS = float32(*cfg.EventRecordQPS)
	}
	maxImages := 50
	if cfg.NodeStatusMaxImages != nil {
		maxImages = int(*cfg.NodeStatusMaxImages)
	}
	var bootstrap *certificates.Bootstrap
	if f := a.opts.Cluster.BootstrapKubeconfig; f != "" {
		bootstrap = &certificates.Bootstrap{Kubeconfig: a.opts.Cluster.Kubeconfig, BootstrapKubeconfig: f, CertDir: a.certDir(), Node: a.opts.NodeName,
			Rotate: cfg.RotateCertificates, Log: a.log.With("component", "tls-bootstrap"), RenewFailures: p.metrics.clientRenewErrors}
		p.metrics.clientCert = bootstrap.Current
		p.closers = append(p.closers, bootstrap.Stop)
		if bootstrap.Rotate {
			certificates.ShortenReload()
		}
	}
	c.node = cluster.New(cluster.Options{
		Bootstrap: bootstrap,
		Connection: cluster.Connection{Kubeconfig: a.opts.Cluster.Kubeconfig, QPS: qps, Burst: int(cfg.KubeAPIBurst), Node: a.opts.NodeName,
			EventQPS: eventQPS, EventBurst: int(cfg.EventBurst),
			Observe: p.metrics.apiRequest},
		Node: node.ObjectOptions{
			Register: cfg.RegisterNode == nil || *cfg.RegisterNode, Labels: a.opts.Cluster.NodeLabels, Taints: cfg.RegisterWithTaints,
			UpdateFrequency: cfg.NodeStatusUpdateFrequency.Duration, ReportFrequency: cfg.NodeStatusReportFrequency.Duration,
			MaxImages: maxImages, KubeletPort: cfg.Port,
		},
		LeaseDuration: time.Duration(cfg.NodeLeaseDurationSeconds) * time.Second,
		Build:         p.nodeStatus.Node,
		Images:        runtimeImages(p.rt),
		Clock:         clk,
		Log:           a.log.With("component", "cluster"),
	})
	c.pods = source.NewAPI(c.node.Client, a.opts.NodeName, a.log.With("component", "source", "source", source.SourceAPI))
	c.status = status.NewAPISync(c.node.Client, p.store, c.pods, p.store.Subscribe(), clk, a.log.With("component", "status-sync"))
	c.objects = objects.NewManager(c.node.Client, p.changes.Runtime.Add, clk, a.log.With("component", "objects"))
	return nil
}

// runtimeImages lists the runtime's images for the node status.
func runtimeImages(rt Runtime) func(context.Context) ([]corev1.ContainerImage, error) {
	return func(ctx context.Context) ([]corev1.ContainerImage, error) {
		imgs, err := rt.ListImages(ctx)
		if err != nil {
			return nil, err
		}
		out := make([]corev1.ContainerImage, 0, len(imgs))
		for _, img := range imgs {
			names := append(append([]string(nil), img.RepoDigests...), img.RepoTags...)
			if len(names) == 0 {
				continue
			}
			out = append(out, corev1.ContainerImage{Names: names, SizeBytes: int64(img.GetSize())})
		}
		return out, nil
	}
}
