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

	"nodeagent/agent/config"
	"nodeagent/agent/devices"
	"nodeagent/agent/events"
	"nodeagent/agent/images"
	"nodeagent/agent/images/pullrecords"
	"nodeagent/agent/logs"
	"nodeagent/agent/mirror"
	"nodeagent/agent/node"
	"nodeagent/agent/pleg"
	"nodeagent/agent/podresources"
	"nodeagent/agent/pods"
	"nodeagent/agent/pods/criconfig"
	"nodeagent/agent/server"
	"nodeagent/agent/shutdown"
	"nodeagent/agent/source"
	"nodeagent/agent/stats"
	"nodeagent/agent/status"
	"nodeagent/cgroups"
	"nodeagent/cgroups/cpumanager"
	"nodeagent/cri"
	"nodeagent/eviction"
	"nodeagent/internal/control"
	"nodeagent/internal/layout"
	"nodeagent/internal/notify"
	"nodeagent/internal/qos"
	"nodeagent/internal/residency"
	"nodeagent/internal/version"
	"nodeagent/manifest"
	"nodeagent/probes"
)

// parts are the agent's components, built in dependency order: each gets
// what it needs through its constructor.
type parts struct {
	// What the steps found out, for the steps after them.
	version      *runtimeapi.VersionResponse
	rtStatus     *runtimeapi.StatusResponse
	machine      node.Machine
	capacity     corev1.ResourceList
	allocatable  corev1.ResourceList
	nodeIP       string
	cgroupDriver string // the runtime's, else cgroupDriver's
	oomRange     qos.OOMScoreRange
	apiAddr      string
	thresholds   []eviction.Threshold
	signals      *eviction.HostSource
	pressure     *eviction.Pressure
	changes      pods.Changes // what wakes the pod workers

	rt         Runtime
	mgr        cgroups.Manager
	tree       *cgroups.Tree
	network    *podNetwork
	cache      *pleg.Cache
	prober     *probes.Manager
	manager    *pods.Manager
	alarm      *eviction.Alarm
	evictor    *eviction.Manager
	imageGC    *images.GC
	pulled     *pullrecords.Store // which credentials pulled each image
	rotator    *logs.Rotator
	files      *source.File
	store      *status.Store
	recorder   *events.Recorder
	nodeStatus *node.Status
	stats      *stats.Provider // nil without cadvisor
	metrics    *nodeMetrics
	cluster    *clusterParts // nil when standalone
	api        *served       // nil when readOnlyPort is 0
	healthz    *served       // nil when healthzPort is 0 or taken
	devices    *devices.Manager
	podRes     *podresources.Server
	cpus       *cpumanager.Manager // nil: cpuManagerPolicy none
	swap       criconfig.SwapOptions
	kubelet    *served             // the authenticated server; nil when standalone
	control    *served             // nil without a control socket
	pages      *residency.Releaser // nil with --release-binary-pages=false
	shutdown   *shutdown.Manager   // nil: no graceful node shutdown

	closers []func() // undo what build did, last first
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

// build sets the node up and builds every component, step by step: each
// step takes what the ones before it built, and no component reaches for
// one built after it. On error, what was built is in p for close.
func (a *Agent) build(ctx context.Context) (*parts, error) {
	p := &parts{metrics: newNodeMetrics(a.opts.NodeName),
		changes: pods.Changes{Runtime: notify.NewSet[types.UID](), Probes: notify.NewSet[pods.ProbeChange]()}}
	steps := []func(context.Context, *parts) error{
		a.buildListeners,    // first: a live control socket means another agent runs here
		a.buildRuntime,      // the runtime answers and is ready
		a.buildNode,         // machine facts, the QoS cgroup tree, the pod network
		a.evictionSignals,   // thresholds checked against the node, kernel notifications armed
		a.buildNodeStatus,   // status store, events, device plugins, the node's status
		a.buildCluster,      // API-server mode's connection, pod source, status sync, objects
		a.buildPods,         // relist cache, probes, the pod manager, mirror pods
		a.buildHousekeeping, // image GC, log rotation, the eviction manager
		a.buildShutdown,     // graceful node shutdown
		a.buildPodResources, // the pod resources API
		a.buildSources,      // the first relist, the manifest directory, stats
		a.buildServers,
	}
	for _, step := range steps {
		if err := step(ctx, p); err != nil {
			return p, err
		}
	}
	return p, nil
}

// buildListeners opens the root directory and every port the agent
// serves, before anything else: a port another process holds stops the
// agent before it touches the node.
func (a *Agent) buildListeners(_ context.Context, p *parts) error {
	cfg, log := a.cfg, a.log
	if err := os.MkdirAll(a.opts.RootDir, 0o750); err != nil {
		return fmt.Errorf("root directory: %w (set --root-dir to a directory the agent may create)", err)
	}
	if a.opts.ControlSocket != "" {
		l, err := control.Listen(a.opts.ControlSocket, server.MaxControlConns)
		if err != nil {
			return err
		}
		p.control = &served{l: l}
		p.closers = append(p.closers, func() { l.Close() })
	}
	p.apiAddr = net.JoinHostPort(cfg.Address, strconv.Itoa(int(cfg.ReadOnlyPort)))
	if cfg.ReadOnlyPort > 0 {
		l, err := net.Listen("tcp", p.apiAddr)
		if err != nil {
			return fmt.Errorf("read-only API on %s: %w: another process (a kubelet, another agent) holds the port; stop it, or set readOnlyPort to a free port (0 disables the API)", p.apiAddr, err)
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
			return fmt.Errorf("kubelet server on %s: %w: another process (a kubelet, another agent) holds the port; stop it, or set port to a free one", addr, err)
		}
		p.kubelet = &served{l: server.LimitClients(l, server.MaxKubeletConns, server.MaxKubeletConnsPerClient)}
		p.closers = append(p.closers, func() { l.Close() })
	}
	return nil
}

// buildRuntime connects to the injected runtime, else the CRI endpoint.
func (a *Agent) buildRuntime(ctx context.Context, p *parts) error {
	rt := a.opts.Runtime
	if rt == nil {
		client, err := cri.New(a.cfg.ContainerRuntimeEndpoint, cri.Options{Timeout: a.cfg.RuntimeRequestTimeout.Duration, Observe: p.metrics.runtimeCall})
		if err != nil {
			return err
		}
		rt = client
	}
	p.rt = rt
	p.closers = append(p.closers, func() { rt.Close() })
	return a.connectRuntime(ctx, p)
}

// buildNode reads the machine, sets the agent's own OOM score, makes the
// QoS cgroup tree and the pod network.
func (a *Agent) buildNode(ctx context.Context, p *parts) error {
	cfg, log := a.cfg, a.log
	// Once the runtime answered: an agent that cannot run leaves no bind.
	if err := a.opts.ShareRootDir(a.opts.RootDir); err != nil {
		return fmt.Errorf("root directory %s: %w (Bidirectional volumes need it on a shared mount)", a.opts.RootDir, err)
	}
	machine, err := a.machine()
	if err != nil {
		return fmt.Errorf("read machine facts: %w", err)
	}
	p.machine = machine
	p.capacity = machine.Capacity(cfg.MaxPods)
	p.allocatable = node.Allocatable(p.capacity, cfg)
	p.nodeIP = a.opts.NodeIP
	if p.nodeIP == "" {
		p.nodeIP = node.IP(cfg.Address)
	}
	p.oomRange = node.OOMScoreRange()
	log.Info(p.oomRange.String())
	if err := node.SetOwnOOMScoreAdj(-999); err != nil {
		log.Info("agent keeps its own oom_score_adj: the host refuses -999", "err", err)
	}
	if err := a.buildCPUManager(p); err != nil {
		return err
	}
	if err := a.buildCgroups(ctx, p); err != nil {
		return err
	}
	if p.swap, err = a.swapOptions(p); err != nil {
		return err
	}
	p.network = newPodNetwork(a.opts, p.rtStatus.Info, p.rt, log.With("component", "network"))
	if a.opts.Cluster != nil {
		p.network.ensure(ctx, "") // the Node's pod CIDRs come once it joined
	} else {
		p.network.ensure(ctx, cfg.PodCIDR)
	}
	return nil
}

// buildNodeStatus makes the status store, the event recorder (forwarding
// to the API server in API-server mode), the device plugin manager and
// the node's status.
func (a *Agent) buildNodeStatus(_ context.Context, p *parts) error {
	p.store = status.NewStore()
	var forward events.Forward
	if a.opts.Cluster != nil {
		p.cluster = &clusterParts{events: events.NewAPISink(a.opts.NodeName)}
		forward = p.cluster.events.Forward
	}
	p.recorder = events.NewForwardingRecorder(a.opts.Clock, a.opts.NodeName, events.DefaultCapacity, forward)
	p.pressure = eviction.NewPressure(a.cfg.EvictionPressureTransitionPeriod.Duration, a.opts.Clock)
	p.devices = devices.NewManager(layout.Root(a.opts.RootDir).DevicePlugins(), a.opts.Clock, a.log.With("component", "devices"))
	p.devices.OnHealthChange(p.changes.Runtime.Add) // their pods' statuses follow
	p.nodeStatus = node.NewStatus(node.Facts{
		Name: a.opts.NodeName, IP: p.nodeIP, Version: version.KubeletVersion(), RuntimeVersion: p.version.RuntimeName + "://" + p.version.RuntimeVersion,
		Machine: p.machine, Capacity: p.capacity, Allocatable: p.allocatable, Pressure: p.pressure.Conditions, Extended: p.devices.Resources,
		StrictSupplementalGroups: p.rtStatus.GetFeatures().GetSupplementalGroupsPolicy(),
		RuntimeHandlers:          nodeRuntimeHandlers(p.rtStatus),
		Annotations: map[string]string{
			node.AnnotationCgroupVersion: "v" + strconv.Itoa(p.mgr.Version()),
			node.AnnotationCgroupDriver:  p.cgroupDriver,
			node.AnnotationCgroupRoot:    p.mgr.Path(p.tree.Kubepods()),
		},
	})
	if p.mgr.Version() == 1 {
		// The kubelet's warning, event and all, for a v1 host it runs on.
		a.log.Warn(cgroupV1Deprecated)
		p.recorder.Event(p.recorder.NodeRef(), corev1.EventTypeWarning, "CgroupV1", cgroupV1Deprecated)
	}
	return nil
}

// buildPods makes the runtime cache, the prober, the pod manager and, in
// API-server mode, the mirror pods that follow the manager's static pods.
func (a *Agent) buildPods(ctx context.Context, p *parts) error {
	cfg, log := a.cfg, a.log
	usernsPods, err := a.buildUserNamespaces(ctx, p)
	if err != nil {
		return err
	}
	if err := a.buildPullRecords(ctx, p); err != nil {
		return err
	}
	changes := p.changes
	sources, gone := []string{manifest.SourceFile}, func(*corev1.Pod) {}
	var objects pods.Objects // nil interface when standalone
	if p.cluster != nil {
		sources, gone, objects = append(sources, source.SourceAPI), p.cluster.status.Gone, p.cluster.objects
	}
	notify := changes.Runtime.Add
	if a.buildPageRelease(p); p.pages != nil {
		// A container starting or ending is pod work: the pages go after it.
		notify = func(uid types.UID) { changes.Runtime.Add(uid); p.pages.Busy() }
	}
	p.cache = pleg.New(p.rt, pleg.Options{Node: a.opts.NodeName, Clock: a.opts.Clock, Log: log.With("component", "pleg"),
		Notify: notify, RelistObserved: func(d time.Duration) { p.metrics.relist.Observe(d.Seconds()) },
		RelistInterval: func(d time.Duration) { p.metrics.relistInterval.Observe(d.Seconds()) }})
	hooks := probes.NewHandlers(p.rt)
	p.prober = probes.NewManager(probes.Options{
		Clock: a.opts.Clock, Handlers: hooks, StateDir: filepath.Join(a.opts.RootDir, "probes"),
		Changed: func(uid types.UID, kind probes.Kind) { changes.Probes.Add(pods.ProbeChange{UID: uid, Kind: kind}) },
		Event: func(pod *corev1.Pod, container, eventType, reason, message, output string) {
			p.recorder.EventOutput(events.PodRef(pod, container), eventType, reason, message, output)
		},
		Log: log.With("component", "probes"),
	})
	p.manager = pods.NewManager(pods.Options{
		NodeName:                 a.opts.NodeName,
		NodeIP:                   p.nodeIP,
		RuntimeName:              p.version.RuntimeName,
		PodLogsDir:               cfg.PodLogsDir,
		RootDir:                  a.opts.RootDir,
		MaxPods:                  int(cfg.MaxPods),
		Allocatable:              p.allocatable,
		MemoryCapacity:           p.machine.MemoryBytes,
		OOMRange:                 p.oomRange,
		EnforceCPULimits:         cfg.EnforceCPULimits(),
		CPUPeriod:                cfg.CPUPeriodMicros(),
		ClusterDNS:               cfg.ClusterDNS,
		ClusterDomain:            cfg.ClusterDomain,
		ResolvConf:               cfg.ResolvConf(),
		MaxRestartBackOff:        cfg.MaxRestartBackOff(),
		Sources:                  sources,
		SerializeImagePulls:      cfg.SerializeImagePulls == nil || *cfg.SerializeImagePulls,
		OOMGroupKill:             cgroups.FeaturesOf(p.mgr).OOMGroup && (cfg.SingleProcessOOMKill == nil || !*cfg.SingleProcessOOMKill),
		MemoryQoS:                cgroups.FeaturesOf(p.mgr).MemoryQoS && cfg.MemoryQoS(),
		TieredMemory:             cfg.TieredMemory(),
		MemoryThrottlingFactor:   cfg.ThrottlingFactor(),
		AllocatableMemory:        absoluteAllocatableMemory(p.capacity, cfg.Reserved()),
		AppArmor:                 pods.AppArmorEnabled(),
		AllowedUnsafeSysctls:     cfg.AllowedUnsafeSysctls,
		StrictSupplementalGroups: p.rtStatus.GetFeatures().GetSupplementalGroupsPolicy(),
		RecursiveReadOnlyMounts:  defaultHandler(p.rtStatus).GetFeatures().GetRecursiveReadOnlyMounts(),
		DeclaredFeatures:         node.DeclaredFeatures(),
		VolumeContentLimit:       a.opts.VolumeContentLimit,
		ContainerLogLinks:        "/var/log/containers",
		Swap:                     p.swap,
	}, pods.Deps{Runtime: p.rt, Cache: p.cache, Tree: p.tree, Store: p.store, Events: p.recorder, Clock: a.opts.Clock, Log: log.With("component", "pods"),
		Probes: p.prober, Hooks: hooks, Pressure: p.pressure, Changes: changes, NetworkReady: p.nodeStatus.NetworkError,
		PodStarted: p.metrics.podStarted, PodSynced: p.metrics.podSynced, Preempted: p.metrics.preempted, ShuttingDown: func() bool { return p.shutdown.ShuttingDown() }, SandboxCreated: p.metrics.sandboxCreated, Gone: gone, Objects: objects, Devices: p.devices,
		KillPod: p.killPod(cfg.PerQOS(), a.opts.EvictionGracefulHardMemory), UserNamespaces: usernsPods, PullRecords: p.pulled, CPUs: p.podCPUs(),
	})
	if p.cpus != nil {
		p.cpus.OnChange(p.manager.CPUPoolChanged)
	}
	if c := p.cluster; c != nil {
		// A mirror pod waits while its static pod of the same name stops.
		c.mirrors = mirror.NewManager(c.node.Client, c.pods, c.node.Node, p.manager.Terminating, a.opts.Clock, log.With("component", "mirror-pods"))
	}
	return nil
}

// imageGCPolicy is the config's image GC settings.
func imageGCPolicy(cfg *config.Config) images.Policy {
	high, low := cfg.ImageGCThresholds()
	return images.Policy{HighThresholdPercent: high, LowThresholdPercent: low, MinAge: cfg.ImageMinimumGCAge.Duration, MaxAge: cfg.ImageMaximumGCAge.Duration}
}

// buildHousekeeping makes image GC, log rotation and the eviction
// manager, which reclaims through the first two.
func (a *Agent) buildHousekeeping(ctx context.Context, p *parts) error {
	cfg, log := a.cfg, a.log
	p.imageGC = images.NewGC(p.rt, imageGCPolicy(cfg), sandboxImage(p.rtStatus.Info), a.opts.Clock, log.With("component", "images"))
	p.imageGC.OnPresent(p.pulled.Prune)
	p.rotator = logs.NewRotator(p.rt, p.cache, cfg.LogMaxSize(), cfg.LogMaxFiles(), a.opts.Clock, log.With("component", "logs"))
	p.evictor = eviction.NewManager(eviction.Options{
		Thresholds: p.thresholds, MaxPodGracePeriod: int64(cfg.EvictionMaxPodGracePeriod),
		Pressure: p.pressure, Alarm: p.alarm, Ranking: eviction.Ranking(a.opts.EvictionRanking),
		Period: a.opts.EvictionPollPeriod, ThreadNice: a.opts.EvictionThreadNice, Clock: a.opts.Clock, Log: log.With("component", "eviction"),
		Event: func(eventType, reason, message string) {
			p.recorder.Event(p.recorder.NodeRef(), eventType, reason, message)
		},
		Reclaim: p.reclaim,
	}, p.signals, evictedPods{p.manager}, eviction.NewHostUsage(ctx, p.rt, p.tree, p.cache.ContainerNames, a.opts.RootDir, cfg.PodLogsDir))
	return nil
}

// buildSources relists the runtime (the pods that already run), reads the
// runtime's readiness into the node status, and makes the manifest
// directory's source and the stats provider.
func (a *Agent) buildSources(ctx context.Context, p *parts) error {
	cfg, log := a.cfg, a.log
	if err := p.cache.Relist(ctx); err != nil {
		return fmt.Errorf("list the runtime's pods: %w", err)
	}
	a.updateNodeStatus(ctx, p)
	p.files = source.NewFile(cfg.StaticPodPath, a.opts.NodeName, cfg.FileCheckFrequency.Duration, log.With("component", "source"))
	cad, err := cgroups.NewCadvisor()
	if err != nil {
		log.Warn("no cadvisor stats: eviction messages name pods only, pid pressure evicts nobody, no /stats/summary, /metrics/resource or /metrics/cadvisor", "err", err)
		return nil
	}
	p.stats = &stats.Provider{
		NodeName: a.opts.NodeName, Tree: p.tree, Pods: p.store.List, RootDir: a.opts.RootDir, LogsDir: cfg.PodLogsDir,
		MemoryCapacity: p.machine.MemoryBytes, PIDMax: p.machine.PIDMax, DefaultInterface: p.machine.DefaultInterface, BootTime: p.machine.BootTime,
		KernelVersion: p.machine.KernelVersion, Cadvisor: cad,
		ContainerStats: func(ctx context.Context) ([]*runtimeapi.ContainerStats, error) {
			return p.rt.ListContainerStats(ctx, &runtimeapi.ContainerStatsFilter{})
		},
		ImageFs: p.rt.ImageFsInfo,
	}
	if period := cfg.VolumeStatsAggPeriod.Duration; period > 0 {
		rootDir, logsDir := a.opts.RootDir, cfg.PodLogsDir
		p.stats.Disk = &stats.DiskUsage{Dirs: func() []string { return stats.PodDirs(p.store.List(), rootDir, logsDir) },
			Period: period, Clock: a.opts.Clock, Log: log.With("component", "stats")}
	}
	return nil
}

// connectRuntime checks that the runtime answers and is ready.
func (a *Agent) connectRuntime(ctx context.Context, p *parts) error {
	ver, err := p.rt.Version(ctx)
	if err != nil {
		return err
	}
	if p.rtStatus, err = p.rt.Status(ctx, true); err != nil {
		return err
	}
	endpoint := a.cfg.ContainerRuntimeEndpoint
	if c := cri.Condition(p.rtStatus.Status, "RuntimeReady"); c == nil || !c.Status {
		return fmt.Errorf("container runtime at %s is not ready: %s", endpoint, conditionText(c))
	}
	p.version = ver
	a.log.Info("connected to container runtime", "endpoint", endpoint, "runtime", ver.RuntimeName, "version", ver.RuntimeVersion, "cri", ver.RuntimeApiVersion)
	return nil
}

// machine is the injected machine facts, else the host's.
func (a *Agent) machine() (node.Machine, error) {
	if a.opts.Machine != nil {
		return *a.opts.Machine, nil
	}
	return node.ReadMachine(a.opts.RootDir)
}
