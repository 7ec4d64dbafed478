package agent

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
	"k8s.io/component-helpers/node/util/sysctl"
	"k8s.io/utils/clock"

	"nodeagent/agent/config"
	"nodeagent/agent/images"
	"nodeagent/agent/node"
	"nodeagent/agent/pleg"
	"nodeagent/agent/source"
	"nodeagent/cgroups"
	"nodeagent/cri"
	"nodeagent/eviction"
	"nodeagent/internal/loop"
	"nodeagent/internal/mounts"
	"nodeagent/internal/version"
)

// Options are the settings that are not part of the KubeletConfiguration.
type Options struct {
	NodeName   string   // defaults to the lower-cased hostname
	RootDir    string   // agent state (emptyDir volumes); default /var/lib/nodeagent
	CNIConfDir string   // overrides the directory the runtime reports
	CNIBinDirs []string // overrides the plugin directories the runtime reports
	// ImageGCPeriod is how often unused images are collected (the
	// kubelet's fixed 5 minutes by default).
	ImageGCPeriod time.Duration
	// ControlSocket is the root-only unix socket for nodectl's changes
	// (delete with a grace period); empty disables it.
	ControlSocket string
	// Cluster, when set, joins the node to a Kubernetes control plane
	// (API-server mode); nil: standalone.
	Cluster *ClusterOptions
	// NodeIP is the node's address (--node-ip); empty: the address of the
	// default route's interface.
	NodeIP string
	// EvictionRanking orders eviction candidates: "kubelet" (default) or
	// "qos" (BestEffort, then Burstable, then Guaranteed).
	EvictionRanking string
	// EvictionPollPeriod is the eviction manager's safety-net poll under
	// the kernel's notifications (default 1 s).
	EvictionPollPeriod time.Duration
	// EvictionThreadNice is the niceness the eviction manager decides at
	// (--eviction-thread-nice; 0 leaves it).
	EvictionThreadNice int
	// EvictionGracefulHardMemory leaves the victims of hard memory
	// thresholds to their pod workers (SIGTERM, a second, SIGKILL through
	// the runtime) as the kubelet does, instead of killing them through
	// their cgroups at once (--eviction-hard-memory-kill=runtime).
	EvictionGracefulHardMemory bool
	// VolumeContentLimit bounds what a pod's configMap, secret,
	// downwardAPI and projected volumes hold together
	// (--pod-volume-content-limit; 0: volumes.DefaultContentLimit).
	VolumeContentLimit int64
	// Reload signals a config reload (SIGHUP): the reloadable fields of the
	// config file are taken, the others logged as needing a restart.
	Reload <-chan struct{}
	// KeepBinaryPages leaves the binary's pages mapped after start-up and
	// bursts of pod work (--release-binary-pages=false).
	KeepBinaryPages bool
	Logger          *slog.Logger
	Clock           clock.WithTicker

	// Injected in place of the host's (nil: the host's): the container
	// runtime, the cgroup manager (with cgroupDriver's driver otherwise),
	// the machine's facts, the kernel's settings.
	Runtime Runtime
	Cgroups cgroups.Manager
	Machine *node.Machine
	// Sysctl reads and writes the kernel settings the kubelet sets at
	// start (kerneltunables.go).
	Sysctl sysctl.Interface
	// ShareRootDir puts the root directory on a shared mount (nil:
	// mounts.MakeRShared, as the kubelet at start).
	ShareRootDir func(dir string) error
}

// ClusterOptions are API-server mode's settings outside the
// KubeletConfiguration.
type ClusterOptions struct {
	Kubeconfig string
	NodeLabels map[string]string // --node-labels
	// BootstrapKubeconfig turns TLS bootstrap on: Kubeconfig is written
	// with a client certificate requested through it, kept in CertDir
	// (default <root-dir>/pki).
	BootstrapKubeconfig, CertDir string
}

// certDir is where TLS bootstrap keeps the node's certificates, and the
// self-signed serving pair: --cert-dir, default <root-dir>/pki.
func (a *Agent) certDir() string {
	if a.opts.Cluster != nil && a.opts.Cluster.CertDir != "" {
		return a.opts.Cluster.CertDir
	}
	return filepath.Join(a.opts.RootDir, "pki")
}

// Agent is one node agent.
type Agent struct {
	cfg       *config.Config
	opts      Options
	log       *slog.Logger
	effective atomic.Pointer[config.Config] // cfg with reloads applied, for /configz
}

// New checks the options and returns an agent; Run does the work.
func New(cfg *config.Config, opts Options) (*Agent, error) {
	if opts.NodeName == "" {
		return nil, errors.New("node name is empty")
	}
	if opts.RootDir == "" {
		opts.RootDir = "/var/lib/nodeagent"
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.ShareRootDir == nil {
		opts.ShareRootDir = mounts.MakeRShared
	}
	a := &Agent{cfg: cfg, opts: opts, log: opts.Logger}
	a.effective.Store(cfg)
	return a, nil
}

// Run builds the agent's components, starts their loops and runs until
// ctx is done; then it stops in order: servers, loops, what build set up.
// It returns an error only when the node cannot be set up.
func (a *Agent) Run(ctx context.Context) error {
	for _, w := range a.cfg.Warnings {
		a.log.Warn("config: " + w)
	}
	p, err := a.build(ctx)
	defer p.close()
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	for _, run := range a.loops(p) {
		wg.Go(func() { run(ctx) })
	}
	if err := eviction.WatchKernelOOM(ctx, "/dev/kmsg", a.onKernelOOM(p)); err != nil {
		a.log.Warn("kernel OOM kills are not observed (no kernel log)", "err", err)
	}
	if p.api != nil {
		wg.Go(func() { a.serve(p.api, "read-only API") })
		a.log.Info("read-only API listening", "addr", "http://"+p.api.srv.Addr, "endpoints", "/healthz /pods /pods/{ns}/{name}/probes /node /events /evictions /configz /metrics /metrics/resource /metrics/cadvisor /stats/summary /cgroups /cpus")
	}
	if p.healthz != nil {
		wg.Go(func() { a.serve(p.healthz, "healthz") })
		a.log.Info("healthz listening", "addr", "http://"+p.healthz.srv.Addr+"/healthz")
	}
	if p.kubelet != nil {
		wg.Go(func() { a.serve(p.kubelet, "kubelet server") })
		a.log.Info("kubelet server listening", "addr", "https://"+p.kubelet.srv.Addr, "authorization", a.cfg.Authorization.Mode)
	}
	if p.control != nil {
		wg.Go(func() { a.serve(p.control, "control socket") })
	}
	a.log.Info("nodeagent running", "node", a.opts.NodeName, "ip", p.nodeIP, "manifests", a.cfg.StaticPodPath, "version", version.Version)
	daemon.SdNotify(false, daemon.SdNotifyReady)

	<-ctx.Done()
	daemon.SdNotify(false, daemon.SdNotifyStopping)
	a.log.Info("shutting down; pods keep running")
	a.stopServers(p)
	wg.Wait()
	return nil
}

// loops are the agent's long-running loops; each returns when ctx ends.
func (a *Agent) loops(p *parts) []func(context.Context) {
	cfg, clk := a.cfg, a.opts.Clock
	updates := make(chan source.Update)
	gcPeriod := a.opts.ImageGCPeriod
	if gcPeriod <= 0 {
		gcPeriod = images.Period
	}
	loops := []func(context.Context){
		func(ctx context.Context) { p.manager.Run(ctx, updates) },
		p.cache.Run,
		func(ctx context.Context) {
			p.cache.WatchEvents(ctx, func(ctx context.Context) (pleg.EventStream, error) { return p.rt.GetContainerEvents(ctx) }, cri.IsUnimplemented)
		},
		p.prober.Run,
		p.evictor.Run,
		func(ctx context.Context) {
			if err := p.devices.Run(ctx); err != nil {
				a.log.Warn("device plugins are not served", "err", err)
			}
		},
		func(ctx context.Context) { a.runPodResources(ctx, p) },
		func(ctx context.Context) { p.imageGC.Run(ctx, gcPeriod) },
		func(ctx context.Context) { p.rotator.Run(ctx, cfg.LogMonitorInterval()) },
		func(ctx context.Context) { a.runShutdown(ctx, p) },
		func(ctx context.Context) {
			for {
				select {
				case <-ctx.Done():
					return
				case <-a.opts.Reload:
					a.reload(p)
				}
			}
		},
		func(ctx context.Context) {
			loop.Every(ctx, clk, runtimeCheckPeriod, func(ctx context.Context) {
				a.updateNodeStatus(ctx, p)
				if p.cluster != nil {
					p.network.follow(ctx, p.cluster.node.Node(), cfg.PodCIDR)
				}
			})
		},
	}
	// Every source feeds the one channel the manager merges.
	sources := []source.Source{p.files}
	if p.cluster != nil {
		c := p.cluster
		sources = []source.Source{
			source.Observed(p.files, func(u source.Update) { c.mirrors.SetStatic(u.Pods) }),
			// The objects API pods reference are watched before the pods run.
			source.Observed(c.pods, func(u source.Update) { c.objects.Track(u.Pods) }),
		}
		loops = append(loops, c.node.Run, c.status.Run, c.mirrors.Run, c.objects.Run,
			func(ctx context.Context) { c.events.Run(ctx, c.node.EventClient) })
	}
	for _, src := range sources {
		loops = append(loops, func(ctx context.Context) { src.Run(ctx, updates) })
	}
	if p.pages != nil {
		loops = append(loops, a.releasePagesLoop(p))
	}
	if p.stats != nil {
		// CPU rates need an earlier reading, as cadvisor's housekeeping keeps.
		loops = append(loops, func(ctx context.Context) {
			loop.Every(ctx, clk, statsSamplePeriod, func(context.Context) { p.stats.Sample() })
		})
		if p.stats.Disk != nil {
			loops = append(loops, p.stats.Disk.Run)
		}
	}
	// Under systemd (Type=notify) the watchdog is petted only while
	// relisting (and so the pod loops) and the eviction loop stay healthy.
	// A runtime that is down is not the agent's fault: a restart would not
	// mend it, so /healthz reports it instead.
	if interval, err := daemon.SdWatchdogEnabled(false); err == nil && interval > 0 {
		loops = append(loops, func(ctx context.Context) {
			loop.Every(ctx, clk, interval/3, func(context.Context) {
				if err := errors.Join(p.cache.Healthy(), p.evictor.Healthy()); err != nil {
					a.log.Warn("not petting the systemd watchdog", "err", err)
					return
				}
				daemon.SdNotify(false, daemon.SdNotifyWatchdog)
			})
		})
	}
	return loops
}

// configz is the configuration in effect, honoured fields only.
func (a *Agent) configz() any {
	fields, err := a.effective.Load().HonouredFields()
	if err != nil {
		return map[string]string{"error": err.Error()}
	}
	return fields
}

// reload re-reads the config file and applies its reloadable fields; a
// file that does not load leaves the running configuration as it is.
func (a *Agent) reload(p *parts) {
	cur := a.effective.Load()
	if cur.File == "" {
		a.log.Warn("config reload: the agent was started without --config; nothing to reload")
		return
	}
	next, err := config.Load(cur.File)
	if err != nil {
		a.log.Error("config reload refused; the running configuration stays", "err", err)
		return
	}
	eff, reloadable, restart, err := config.Reload(cur, next)
	if err != nil {
		a.log.Error("config reload refused; the running configuration stays", "err", err)
		return
	}
	p.imageGC.SetPolicy(imageGCPolicy(eff))
	p.rotator.SetLimits(eff.LogMaxSize(), eff.LogMaxFiles())
	a.effective.Store(eff)
	a.log.Info("config reloaded", "file", cur.File, "applied", reloadable)
	if len(restart) > 0 {
		a.log.Warn("config fields changed that take effect only after a restart (systemctl restart nodeagent)", "fields", restart)
	}
}

// statsSamplePeriod is how often cgroups are read for CPU rates, the
// kubelet's cadvisor housekeeping interval.
const statsSamplePeriod = 10 * time.Second
