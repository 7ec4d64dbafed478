package agent

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"golang.org/x/net/netutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"nodeagent/agent/certificates"
	"nodeagent/agent/cluster"
	"nodeagent/agent/devices"
	"nodeagent/agent/events"
	"nodeagent/agent/images"
	"nodeagent/agent/logs"
	"nodeagent/agent/mirror"
	"nodeagent/agent/node"
	"nodeagent/agent/objects"
	"nodeagent/agent/pleg"
	"nodeagent/agent/pods"
	"nodeagent/agent/server"
	"nodeagent/agent/source"
	"nodeagent/agent/stats"
	"nodeagent/agent/status"
	"nodeagent/cgroups"
	"nodeagent/cri"
	"nodeagent/eviction"
	"nodeagent/internal/control"
	"nodeagent/internal/layout"
	"nodeagent/internal/notify"
	"nodeagent/internal/version"
	"nodeagent/manifest"
	"nodeagent/probes"
)

// parts are the agent's components, built in dependency order: each gets
// what it needs through its constructor.
type parts struct {
	nodeIP     string
	rt         Runtime
	rtStatus   *runtimeapi.StatusResponse
	mgr        cgroups.Manager
	tree       *cgroups.Tree
	cache      *pleg.Cache
	prober     *probes.Manager
	manager    *pods.Manager
	alarm      *eviction.Alarm
	evictor    *eviction.Manager
	imageGC    *images.GC
	rotator    *logs.Rotator
	files      *source.File
	store      *status.Store
	recorder   *events.Recorder
	nodeStatus *node.Status
	network    *podNetwork
	stats      *stats.Provider // nil without cadvisor
	metrics    *nodeMetrics
	cluster    *clusterParts // nil when standalone
	api        *served       // nil when readOnlyPort is 0
	healthz    *served       // nil when healthzPort is 0 or taken
	devices    *devices.Manager
	kubelet    *served // the authenticated server; nil when standalone
	control    *served // nil without a control socket

	closers []func() // undo what build did, last first
}

// clusterParts are API-server mode's components.
type clusterParts struct {
	node    *cluster.Cluster
	pods    *source.API
	status  *status.APISync
	mirrors *mirror.Manager
	events  *events.APISink
	objects *objects.Manager
}

// served is an HTTP server with the listener it serves.
type served struct {
	srv *http.Server
	l   net.Listener
}

func (p *parts) close() {
	for i := len(p.closers) - 1; i >= 0; i-- {
		p.closers[i]()
	}
}

// build sets the node up and builds every component. On error, what was
// built is in p for close.
func (a *Agent) build(ctx context.Context) (p *parts, err error) {
	cfg, log := a.cfg, a.log
	p = &parts{metrics: newNodeMetrics(a.opts.NodeName)}
	if err := os.MkdirAll(a.opts.RootDir, 0o750); err != nil {
		return p, fmt.Errorf("root directory: %w (set --root-dir to a directory the agent may create)", err)
	}
	// The control socket first: a live one means another agent runs here.
	if a.opts.ControlSocket != "" {
		l, err := control.Listen(a.opts.ControlSocket, server.MaxControlConns)
		if err != nil {
			return p, err
		}
		p.control = &served{l: l}
		p.closers = append(p.closers, func() { l.Close() })
	}
	apiAddr := net.JoinHostPort(cfg.Address, strconv.Itoa(int(cfg.ReadOnlyPort)))
	if cfg.ReadOnlyPort > 0 {
		l, err := net.Listen("tcp", apiAddr)
		if err != nil {
			return p, fmt.Errorf("read-only API on %s: %w: another process (a kubelet, another agent) holds the port; stop it, or set readOnlyPort to a free port (0 disables the API)", apiAddr, err)
		}
		p.api = &served{l: netutil.LimitListener(l, server.MaxAPIConns)}
		p.closers = append(p.closers, func() { l.Close() })
	}
	// The healthz port is for local liveness checks; as the kubelet's, a
	// port someone else holds does not stop the agent.
	if cfg.HealthzPort != nil && *cfg.HealthzPort > 0 {
		addr := net.JoinHostPort(cfg.HealthzBindAddress, strconv.Itoa(int(*cfg.HealthzPort)))
		if l, err := net.Listen("tcp", addr); err != nil {
			log.Warn("healthz port not served", "addr", addr, "err", err)
		} else {
			p.healthz = &served{l: netutil.LimitListener(l, server.MaxAPIConns)}
			p.closers = append(p.closers, func() { l.Close() })
		}
	}
	if a.opts.Cluster != nil {
		addr := net.JoinHostPort(cfg.Address, strconv.Itoa(int(cfg.Port)))
		l, err := net.Listen("tcp", addr)
		if err != nil {
			return p, fmt.Errorf("kubelet server on %s: %w: another process (a kubelet, another agent) holds the port; stop it, or set port to a free one", addr, err)
		}
		p.kubelet = &served{l: server.LimitClients(l, server.MaxKubeletConns, server.MaxKubeletConnsPerClient)}
		p.closers = append(p.closers, func() { l.Close() })
	}

	rt := a.opts.Runtime
	if rt == nil {
		client, err := cri.New(cfg.ContainerRuntimeEndpoint, cri.Options{Timeout: cfg.RuntimeRequestTimeout.Duration, Observe: p.metrics.runtimeCall})
		if err != nil {
			return p, err
		}
		rt = client
	}
	p.rt = rt
	p.closers = append(p.closers, func() { rt.Close() })
	ver, err := a.connectRuntime(ctx, p)
	if err != nil {
		return p, err
	}

	machine, err := a.machine()
	if err != nil {
		return p, fmt.Errorf("read machine facts: %w", err)
	}
	capacity := machine.Capacity(cfg.MaxPods)
	allocatable := node.Allocatable(capacity, cfg)
	nodeIP := a.opts.NodeIP
	if nodeIP == "" {
		nodeIP = node.IP(cfg.Address)
	}
	p.nodeIP = nodeIP
	oomRange := node.OOMScoreRange()
	log.Info(oomRange.String())
	if err := node.SetOwnOOMScoreAdj(-999); err != nil {
		log.Info("agent keeps its own oom_score_adj: the host refuses -999", "err", err)
	}
	if err := a.buildCgroups(p, capacity); err != nil {
		return p, err
	}
	p.network = newPodNetwork(a.opts, p.rtStatus.Info, rt, log.With("component", "network"))
	if a.opts.Cluster != nil {
		p.network.ensure(ctx, "") // the Node's pod CIDRs come once it joined
	} else {
		p.network.ensure(ctx, cfg.PodCIDR)
	}

	// One cadvisor reader serves eviction (per-container usage) and stats.
	cad, err := cgroups.NewCadvisor()
	if err != nil {
		log.Warn("no cadvisor stats: eviction messages name pods only, pid pressure evicts nobody, no /stats/summary, /metrics/resource or /metrics/cadvisor", "err", err)
	}
	thresholds, signals, err := a.evictionSignals(ctx, p, machine, capacity)
	if err != nil {
		return p, err
	}

	p.store = status.NewStore()
	var forward events.Forward
	if a.opts.Cluster != nil {
		p.cluster = &clusterParts{events: events.NewAPISink(a.opts.NodeName)}
		forward = p.cluster.events.Forward
	}
	p.recorder = events.NewForwardingRecorder(a.opts.Clock, a.opts.NodeName, events.DefaultCapacity, forward)
	pressure := eviction.NewPressure(cfg.EvictionPressureTransitionPeriod.Duration, a.opts.Clock)
	p.devices = devices.NewManager(layout.Root(a.opts.RootDir).DevicePlugins(), a.opts.Clock, log.With("component", "devices"))
	p.nodeStatus = node.NewStatus(node.Facts{
		Name: a.opts.NodeName, IP: nodeIP, Version: version.KubeletVersion(), RuntimeVersion: ver.RuntimeName + "://" + ver.RuntimeVersion,
		Machine: machine, Capacity: capacity, Allocatable: allocatable, Pressure: pressure.Conditions, Extended: p.devices.Resources,
		Annotations: map[string]string{
			node.AnnotationCgroupVersion: "v" + strconv.Itoa(p.mgr.Version()),
			node.AnnotationCgroupDriver:  cfg.Driver(),
			node.AnnotationCgroupRoot:    p.mgr.Path(p.tree.Kubepods()),
		},
	})

	changes := pods.Changes{Runtime: notify.NewSet[types.UID](), Probes: notify.NewSet[pods.ProbeChange]()}
	sources, gone := []string{manifest.SourceFile}, func(*corev1.Pod) {}
	var objects pods.Objects // nil interface when standalone
	if p.cluster != nil {
		a.buildCluster(p, changes.Runtime.Add)
		sources, gone, objects = append(sources, source.SourceAPI), p.cluster.status.Gone, p.cluster.objects
	}

	p.cache = pleg.New(rt, pleg.Options{Node: a.opts.NodeName, Clock: a.opts.Clock, Log: log.With("component", "pleg"),
		Notify: changes.Runtime.Add, RelistObserved: func(d time.Duration) { p.metrics.relist.Observe(d.Seconds()) },
		RelistInterval: func(d time.Duration) { p.metrics.relistInterval.Observe(d.Seconds()) }})
	hooks := probes.NewHandlers(rt)
	p.prober = probes.NewManager(probes.Options{
		Clock: a.opts.Clock, Handlers: hooks, StateDir: filepath.Join(a.opts.RootDir, "probes"),
		Changed: func(uid types.UID, kind probes.Kind) { changes.Probes.Add(pods.ProbeChange{UID: uid, Kind: kind}) },
		Event: func(pod *corev1.Pod, container, eventType, reason, message, output string) {
			p.recorder.EventOutput(events.PodRef(pod, container), eventType, reason, message, output)
		},
		Log: log.With("component", "probes"),
	})
	p.manager = pods.NewManager(pods.Options{
		NodeName:               a.opts.NodeName,
		NodeIP:                 nodeIP,
		RuntimeName:            ver.RuntimeName,
		PodLogsDir:             cfg.PodLogsDir,
		RootDir:                a.opts.RootDir,
		MaxPods:                int(cfg.MaxPods),
		Allocatable:            allocatable,
		MemoryCapacity:         machine.MemoryBytes,
		OOMRange:               oomRange,
		EnforceCPULimits:       cfg.EnforceCPULimits(),
		CPUPeriod:              cfg.CPUPeriodMicros(),
		ClusterDNS:             cfg.ClusterDNS,
		ClusterDomain:          cfg.ClusterDomain,
		ResolvConf:             cfg.ResolvConf(),
		MaxRestartBackOff:      cfg.MaxRestartBackOff(),
		Sources:                sources,
		SerializeImagePulls:    cfg.SerializeImagePulls == nil || *cfg.SerializeImagePulls,
		OOMGroupKill:           p.mgr.Version() == 2 && (cfg.SingleProcessOOMKill == nil || !*cfg.SingleProcessOOMKill),
		MemoryQoS:              p.mgr.Version() == 2 && cfg.MemoryQoS(),
		MemoryThrottlingFactor: cfg.ThrottlingFactor(),
		AllocatableMemory:      absoluteAllocatableMemory(capacity, cfg.Reserved()),
		AppArmor:               pods.AppArmorEnabled(),
		AllowedUnsafeSysctls:   cfg.AllowedUnsafeSysctls,
		VolumeContentLimit:     a.opts.VolumeContentLimit,
		ContainerLogLinks:      "/var/log/containers",
	}, pods.Deps{Runtime: rt, Cache: p.cache, Tree: p.tree, Store: p.store, Events: p.recorder, Clock: a.opts.Clock, Log: log.With("component", "pods"),
		Probes: p.prober, Hooks: hooks, Pressure: pressure, Changes: changes, NetworkReady: p.nodeStatus.NetworkError,
		PodStarted: p.metrics.podStarted, PodSynced: p.metrics.podSynced, Gone: gone, Objects: objects, Devices: p.devices,
		KillPod: p.killPod(cfg.PerQOS(), a.opts.EvictionGracefulHardMemory),
	})
	if p.cluster != nil {
		// A mirror pod waits while its static pod of the same name stops.
		p.cluster.mirrors.Terminating = p.manager.Terminating
	}

	high, low := cfg.ImageGCThresholds()
	p.imageGC = images.NewGC(rt, images.Policy{HighThresholdPercent: high, LowThresholdPercent: low, MinAge: cfg.ImageMinimumGCAge.Duration},
		sandboxImage(p.rtStatus.Info), a.opts.Clock, log.With("component", "images"))
	p.rotator = logs.NewRotator(rt, p.cache, cfg.LogMaxSize(), cfg.LogMaxFiles(), a.opts.Clock, log.With("component", "logs"))
	p.evictor = eviction.NewManager(eviction.Options{
		Thresholds: thresholds, MaxPodGracePeriod: int64(cfg.EvictionMaxPodGracePeriod),
		Pressure: pressure, Alarm: p.alarm, Ranking: eviction.Ranking(a.opts.EvictionRanking),
		Period: a.opts.EvictionPollPeriod, ThreadNice: a.opts.EvictionThreadNice, Clock: a.opts.Clock, Log: log.With("component", "eviction"),
		Event: func(eventType, reason, message string) {
			p.recorder.Event(p.recorder.NodeRef(), eventType, reason, message)
		},
		Reclaim: p.reclaim,
	}, signals, evictedPods{p.manager}, eviction.NewHostUsage(ctx, rt, p.tree, p.cache.ContainerNames, a.opts.RootDir, cfg.PodLogsDir))

	if err := p.cache.Relist(ctx); err != nil {
		return p, fmt.Errorf("list the runtime's pods: %w", err)
	}
	a.updateNodeStatus(ctx, p)
	p.files = source.NewFile(cfg.StaticPodPath, a.opts.NodeName, cfg.FileCheckFrequency.Duration, log.With("component", "source"))
	if cad != nil {
		p.stats = &stats.Provider{
			NodeName: a.opts.NodeName, Tree: p.tree, Pods: p.store.List, RootDir: a.opts.RootDir, LogsDir: cfg.PodLogsDir,
			MemoryCapacity: machine.MemoryBytes, PIDMax: machine.PIDMax, DefaultInterface: machine.DefaultInterface, BootTime: machine.BootTime,
			KernelVersion: machine.KernelVersion, Cadvisor: cad,
			ContainerStats: func(ctx context.Context) ([]*runtimeapi.ContainerStats, error) {
				return rt.ListContainerStats(ctx, &runtimeapi.ContainerStatsFilter{})
			},
			ImageFs: rt.ImageFsInfo,
		}
		if period := cfg.VolumeStatsAggPeriod.Duration; period > 0 {
			rootDir, logsDir := a.opts.RootDir, cfg.PodLogsDir
			p.stats.Disk = &stats.DiskUsage{Dirs: func() []string { return stats.PodDirs(p.store.List(), rootDir, logsDir) },
				Period: period, Clock: a.opts.Clock, Log: log.With("component", "stats")}
		}
	}
	if err := a.buildServers(p, apiAddr); err != nil {
		return p, err
	}
	return p, nil
}

// connectRuntime checks that the runtime answers and is ready.
func (a *Agent) connectRuntime(ctx context.Context, p *parts) (*runtimeapi.VersionResponse, error) {
	ver, err := p.rt.Version(ctx)
	if err != nil {
		return nil, err
	}
	if p.rtStatus, err = p.rt.Status(ctx, true); err != nil {
		return nil, err
	}
	endpoint := a.cfg.ContainerRuntimeEndpoint
	if c := cri.Condition(p.rtStatus.Status, "RuntimeReady"); c == nil || !c.Status {
		return nil, fmt.Errorf("container runtime at %s is not ready: %s", endpoint, conditionText(c))
	}
	a.log.Info("connected to container runtime", "endpoint", endpoint, "runtime", ver.RuntimeName, "version", ver.RuntimeVersion, "cri", ver.RuntimeApiVersion)
	return ver, nil
}

// buildCgroups makes the QoS cgroup tree, with the runtime's driver.
func (a *Agent) buildCgroups(p *parts, capacity corev1.ResourceList) error {
	cfg := a.cfg
	if err := checkDriverAgreement(cfg.Driver(), p.rtStatus.Info); err != nil {
		return err
	}
	mgr := a.opts.Cgroups
	if mgr == nil {
		var err error
		if mgr, err = cgroups.NewManager(cfg.CgroupDriver); err != nil {
			return err
		}
	}
	p.mgr = mgr
	treeCfg := cgroups.TreeConfig{
		Root:        cgroups.ParseCgroupfs(cfg.CgroupRoot),
		PerQOS:      cfg.PerQOS(),
		Pod:         cgroups.PodOptions{EnforceCPULimits: cfg.EnforceCPULimits(), CPUPeriod: cfg.CPUPeriodMicros(), PidsLimit: cfg.PodPids()},
		Allocatable: cgroups.NodeAllocatableConfig(capacity, cfg.Reserved(), cfg.EnforcePods()),
	}
	if pct, ok := cfg.QOSReservedMemory(); ok {
		treeCfg.MemoryReserve = &pct
	}
	switch {
	case cfg.MemoryQoS() && mgr.Version() == 2:
		treeCfg.MemoryQoS, treeCfg.Pod.MemoryQoS = true, true
	case cfg.MemoryQoS():
		a.log.Warn("featureGates.MemoryQoS is not applied: as in the kubelet, it needs cgroup v2 (memory.min and memory.high); this host has v1")
	}
	p.tree = cgroups.NewTree(mgr, treeCfg)
	if err := p.tree.SyncQoS(nil); err != nil {
		// One line: the first failure says it (the others repeat it for the
		// QoS cgroups below).
		if joined, ok := err.(interface{ Unwrap() []error }); ok && len(joined.Unwrap()) > 0 {
			err = joined.Unwrap()[0]
		}
		return fmt.Errorf("cannot write the QoS cgroups under cgroupRoot %q (%s): %w; run nodeagent as root with %s writable, or set cgroupRoot to a cgroup it may create",
			cfg.CgroupRoot, mgr.Path(p.tree.Kubepods()), err, cgroups.DefaultMountpoint)
	}
	a.log.Info("QoS cgroup tree ready", "cgroups", "v"+strconv.Itoa(mgr.Version()), "kubepods", mgr.Path(p.tree.Kubepods()))
	return nil
}

// buildCluster makes API-server mode's components: the node's
// registration, status and lease, the API pod source, the pod status sync
// and the mirror pods. None contacts the API server before Run.
func (a *Agent) buildCluster(p *parts, wake func(types.UID)) {
	cfg, clk := a.cfg, a.opts.Clock
	c := p.cluster
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
	c.mirrors = mirror.NewManager(c.node.Client, c.pods, c.node.Node, clk, a.log.With("component", "mirror-pods"))
	c.objects = objects.NewManager(c.node.Client, wake, clk, a.log.With("component", "objects"))
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

// absoluteAllocatableMemory is the node's memory less the reserved, what
// memoryQoS throttles a container without a limit towards (the kubelet's
// GetNodeAllocatableAbsolute).
func absoluteAllocatableMemory(capacity corev1.ResourceList, reserved []corev1.ResourceList) int64 {
	rc := cgroups.NodeAllocatableConfig(capacity, reserved, true)
	if rc == nil || rc.Memory == nil {
		return 0
	}
	return *rc.Memory
}

// machine is the injected machine facts, else the host's.
func (a *Agent) machine() (node.Machine, error) {
	if a.opts.Machine != nil {
		return *a.opts.Machine, nil
	}
	return node.ReadMachine(a.opts.RootDir)
}
