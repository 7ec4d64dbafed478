package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/net/netutil"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"nodeagent/agent/config"
	"nodeagent/agent/events"
	"nodeagent/agent/images"
	"nodeagent/agent/logs"
	"nodeagent/agent/node"
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
	"nodeagent/internal/loop"
	"nodeagent/internal/version"
	"nodeagent/network"
	"nodeagent/probes"
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
	// EvictionRanking orders eviction candidates: "kubelet" (default) or
	// "qos" (BestEffort, then Burstable, then Guaranteed).
	EvictionRanking string
	// Reload signals a config reload (SIGHUP): the reloadable fields of the
	// config file are taken, the others logged as needing a restart.
	Reload <-chan struct{}
	Logger *slog.Logger
	Clock  clock.WithTicker
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
	a := &Agent{cfg: cfg, opts: opts, log: opts.Logger}
	a.effective.Store(cfg)
	return a, nil
}

// Run connects to the runtime, sets up the node and runs until ctx is done.
// It returns an error only when the node cannot be set up.
func (a *Agent) Run(ctx context.Context) error {
	cfg, log := a.cfg, a.log
	for _, w := range cfg.Warnings {
		log.Warn("config: " + w)
	}
	if err := os.MkdirAll(a.opts.RootDir, 0o750); err != nil {
		return fmt.Errorf("root directory: %w (set --root-dir to a directory the agent may create)", err)
	}
	// The control socket first: a live one means another agent runs here.
	var controlListener net.Listener
	if a.opts.ControlSocket != "" {
		l, err := control.Listen(a.opts.ControlSocket, server.MaxControlConns)
		if err != nil {
			return err
		}
		controlListener = l
		defer l.Close()
	}
	var apiListener net.Listener
	apiAddr := net.JoinHostPort(cfg.Address, strconv.Itoa(int(cfg.ReadOnlyPort)))
	if cfg.ReadOnlyPort > 0 {
		l, err := net.Listen("tcp", apiAddr)
		if err != nil {
			return fmt.Errorf("read-only API on %s: %w: another process (a kubelet, another agent) holds the port; stop it, or set readOnlyPort to a free port (0 disables the API)", apiAddr, err)
		}
		apiListener = netutil.LimitListener(l, server.MaxAPIConns)
		defer l.Close()
	}
	metrics := newNodeMetrics()
	rt, err := cri.New(cfg.ContainerRuntimeEndpoint, cri.Options{Timeout: cfg.RuntimeRequestTimeout.Duration, Observe: metrics.runtimeCall})
	if err != nil {
		return err
	}
	defer rt.Close()
	ver, err := rt.Version(ctx)
	if err != nil {
		return err
	}
	rtStatus, err := rt.Status(ctx, true)
	if err != nil {
		return err
	}
	if c := cri.Condition(rtStatus.Status, "RuntimeReady"); c == nil || !c.Status {
		return fmt.Errorf("container runtime at %s is not ready: %s", cfg.ContainerRuntimeEndpoint, conditionText(c))
	}
	log.Info("connected to container runtime", "endpoint", cfg.ContainerRuntimeEndpoint, "runtime", ver.RuntimeName, "version", ver.RuntimeVersion, "cri", ver.RuntimeApiVersion)

	machine, err := node.ReadMachine()
	if err != nil {
		return fmt.Errorf("read machine facts: %w", err)
	}
	capacity := machine.Capacity(cfg.MaxPods)
	allocatable := node.Allocatable(capacity, cfg)
	nodeIP := node.IP(cfg.Address)

	oomRange := node.OOMScoreRange()
	log.Info(oomRange.String())
	if err := node.SetOwnOOMScoreAdj(-999); err != nil {
		log.Info("agent keeps its own oom_score_adj: the host refuses -999", "err", err)
	}

	if err := checkDriverAgreement(cfg.CgroupDriver, rtStatus.Info); err != nil {
		return err
	}
	mgr, err := cgroups.NewManager(cfg.CgroupDriver)
	if err != nil {
		return err
	}
	tree := cgroups.NewTree(mgr, cgroups.TreeConfig{
		Root:        cgroups.ParseCgroupfs(cfg.CgroupRoot),
		PerQOS:      cfg.PerQOS(),
		Pod:         cgroups.PodOptions{EnforceCPULimits: cfg.EnforceCPULimits(), CPUPeriod: cfg.CPUPeriodMicros(), PidsLimit: cfg.PodPids()},
		Allocatable: cgroups.NodeAllocatableConfig(capacity, cfg.Reserved(), cfg.EnforcePods()),
	})
	if err := tree.SyncQoS(nil); err != nil {
		// One line: the first failure says it (the others repeat it for the
		// QoS cgroups below).
		if joined, ok := err.(interface{ Unwrap() []error }); ok && len(joined.Unwrap()) > 0 {
			err = joined.Unwrap()[0]
		}
		return fmt.Errorf("cannot write the QoS cgroups under cgroupRoot %q (%s): %w; run nodeagent as root with %s writable, or set cgroupRoot to a cgroup it may create",
			cfg.CgroupRoot, mgr.Path(tree.Kubepods()), err, cgroups.DefaultMountpoint)
	}
	log.Info("QoS cgroup tree ready", "cgroups", "v"+strconv.Itoa(mgr.Version()), "kubepods", mgr.Path(tree.Kubepods()))

	a.ensureNetwork(ctx, rtStatus.Info)

	thresholds, err := cfg.EvictionThresholds()
	if err != nil {
		return err
	}
	podsMemory := machine.MemoryBytes
	if rc := cgroups.NodeAllocatableConfig(capacity, cfg.Reserved(), cfg.EnforcePods()); rc != nil && rc.Memory != nil {
		podsMemory = *rc.Memory
	}
	// One cadvisor reader serves eviction (per-container usage) and stats.
	cad, err := cgroups.NewCadvisor()
	if err != nil {
		log.Warn("no cadvisor stats: eviction messages name pods only, pid pressure evicts nobody, no /stats/summary, /metrics/resource or /metrics/cadvisor", "err", err)
	}
	var evictor *eviction.Manager
	var imageGC *images.GC
	memcg := eviction.NewMemcgThresholds(func(at time.Time, by string) { evictor.NotifyAt(at, by) })
	defer memcg.Close()
	signals := &eviction.HostSource{
		Cgroups: mgr, Kubepods: tree.Kubepods(), MemoryCapacity: machine.MemoryBytes, MemoryAllocatable: podsMemory,
		NodeFsPath: a.opts.RootDir, ImageFs: imageFsMount(rt), PIDMax: machine.PIDMax, Now: a.opts.Clock.Now,
	}
	first, err := signals.Observe(ctx)
	if err != nil {
		log.Warn("some eviction signals cannot be read; thresholds on them are not acted on", "err", err)
	}
	capacities := map[eviction.Signal]int64{}
	for sig, o := range first {
		capacities[sig] = o.Capacity
	}
	if err := eviction.CheckAgainstCapacity(thresholds, capacities); err != nil {
		return fmt.Errorf("eviction thresholds refused: %w", err)
	}

	store := status.NewStore()
	recorder := events.NewRecorder(a.opts.Clock, a.opts.NodeName, events.DefaultCapacity)
	var manager *pods.Manager
	var nodeStatus *node.Status
	hooks := probes.NewHandlers(rt)
	prober := probes.NewManager(probes.Options{
		Clock: a.opts.Clock, Handlers: hooks, StateDir: filepath.Join(a.opts.RootDir, "probes"),
		Changed: func(uid types.UID, kind probes.Kind) { manager.ProbeResultChanged(uid, kind) },
		Event: func(pod *corev1.Pod, container, eventType, reason, message string) {
			recorder.Event(events.PodRef(pod, container), eventType, reason, message)
		},
		Log: log.With("component", "probes"),
	})
	cache := pleg.New(rt, a.opts.NodeName, a.opts.Clock, log.With("component", "pleg"), func(uid types.UID) { manager.Wake(uid) })
	cache.RelistObserved = func(d time.Duration) { metrics.relist.Observe(d.Seconds()) }
	manager = pods.NewManager(pods.Options{
		NodeName:          a.opts.NodeName,
		NodeIP:            nodeIP,
		RuntimeName:       ver.RuntimeName,
		PodLogsDir:        cfg.PodLogsDir,
		RootDir:           a.opts.RootDir,
		MaxPods:           int(cfg.MaxPods),
		Allocatable:       allocatable,
		MemoryCapacity:    machine.MemoryBytes,
		OOMRange:          oomRange,
		EnforceCPULimits:  cfg.EnforceCPULimits(),
		CPUPeriod:         cfg.CPUPeriodMicros(),
		ClusterDNS:        cfg.ClusterDNS,
		ClusterDomain:     cfg.ClusterDomain,
		ResolvConf:        cfg.ResolvConf(),
		MaxRestartBackOff: cfg.MaxRestartBackOff(),
		OOMGroupKill:      mgr.Version() == 2 && (cfg.SingleProcessOOMKill == nil || !*cfg.SingleProcessOOMKill),
	}, pods.Deps{Runtime: rt, Cache: cache, Tree: tree, Store: store, Events: recorder, Clock: a.opts.Clock, Log: log.With("component", "pods"),
		Probes: prober, Hooks: hooks,
		AdmitUnderPressure: func(pod *corev1.Pod) string { return evictor.Admit(pod) },
		PodStarted:         metrics.podStarted,
		NetworkReady: func() error {
			if nodeStatus == nil {
				return nil
			}
			return nodeStatus.NetworkError()
		}})
	evictor = eviction.NewManager(eviction.Options{
		Thresholds: thresholds, MaxPodGracePeriod: int64(cfg.EvictionMaxPodGracePeriod),
		TransitionPeriod: cfg.EvictionPressureTransitionPeriod.Duration, Ranking: eviction.Ranking(a.opts.EvictionRanking),
		Clock: a.opts.Clock, Log: log.With("component", "eviction"),
		Event: func(eventType, reason, message string) {
			recorder.Event(recorder.NodeRef(), eventType, reason, message)
		},
		Reclaim: func(ctx context.Context, _ eviction.Signal) string {
			// The kubelet's order: dead containers, then unused images
			// (which the removed containers may have been holding).
			var did []string
			containers, err := manager.ReclaimContainers(ctx)
			did = append(did, fmt.Sprintf("removed %d dead containers", containers))
			if err != nil {
				did = append(did, "container garbage collection failed: "+err.Error())
			}
			images, err := imageGC.DeleteUnused(ctx)
			did = append(did, fmt.Sprintf("removed %d unused images", len(images)))
			if err != nil {
				did = append(did, "image garbage collection failed: "+err.Error())
			}
			return strings.Join(did, "; ")
		},
	}, signals, manager, hostUsage(ctx, rt, tree, manager, cad, a.opts.RootDir, cfg.PodLogsDir))
	// From here on a crossing has a manager to wake.
	signals.Memcg, signals.Thresholds = memcg, thresholds
	defer watchMemoryPressure(mgr, tree, evictor, signals, log)()
	if err := cache.Relist(ctx); err != nil {
		return fmt.Errorf("list the runtime's pods: %w", err)
	}

	nodeStatus = node.NewStatus(a.opts.NodeName, nodeIP, "nodeagent/"+version.Version, ver.RuntimeName+"://"+ver.RuntimeVersion, machine, capacity, allocatable)
	nodeStatus.SetPressure(evictor.Conditions)
	driver := cfg.CgroupDriver
	if driver == "" {
		driver = "cgroupfs"
	}
	nodeStatus.Annotate(node.AnnotationCgroupVersion, "v"+strconv.Itoa(mgr.Version()))
	nodeStatus.Annotate(node.AnnotationCgroupDriver, driver)
	nodeStatus.Annotate(node.AnnotationCgroupRoot, mgr.Path(tree.Kubepods()))
	a.updateNodeStatus(ctx, rt, nodeStatus, recorder)

	var wg sync.WaitGroup
	run := func(f func()) {
		wg.Add(1)
		go func() { defer wg.Done(); f() }()
	}
	updates := make(chan source.Update)
	fileSource := source.NewFile(cfg.StaticPodPath, a.opts.NodeName, cfg.FileCheckFrequency.Duration, log.With("component", "source"))
	run(func() { fileSource.Run(ctx, updates) })
	run(func() { cache.Run(ctx) })
	run(func() {
		cache.WatchEvents(ctx, func(ctx context.Context) (pleg.EventStream, error) { return rt.GetContainerEvents(ctx) }, cri.IsUnimplemented)
	})
	run(func() { manager.Run(ctx, updates) })
	run(func() { prober.Run(ctx) })
	run(func() { evictor.Run(ctx) })
	if err := eviction.WatchKernelOOM(ctx, "/dev/kmsg", func(k eviction.OOMKill) {
		metrics.kernelOOMKills.WithLabelValues(k.Constraint).Inc()
		recorder.Event(recorder.NodeRef(), corev1.EventTypeWarning, "OOMKilling", oomMessage(k, func(uid types.UID) (*corev1.Pod, bool) {
			if p, ok := manager.Pod(uid); ok {
				return p, true
			}
			return store.Get(uid)
		}))
		log.Warn("kernel OOM killer", "process", k.Process, "pid", k.PID, "cgroup", k.TaskMemcg, "limit_of", k.OOMMemcg, "constraint", k.Constraint)
		evictor.NotifyAt(k.Seen, eviction.WokenByKernelOOM) // a kill is the strongest pressure signal there is
	}); err != nil {
		log.Warn("kernel OOM kills are not observed (no kernel log)", "err", err)
	}
	high, low := cfg.ImageGCThresholds()
	imageGC = images.NewGC(rt, images.Policy{HighThresholdPercent: high, LowThresholdPercent: low, MinAge: cfg.ImageMinimumGCAge.Duration},
		sandboxImage(rtStatus.Info), a.opts.Clock, log.With("component", "images"))
	gcPeriod := a.opts.ImageGCPeriod
	if gcPeriod <= 0 {
		gcPeriod = images.Period
	}
	run(func() { imageGC.Run(ctx, gcPeriod) })
	rotator := logs.NewRotator(rt, cache, cfg.LogMaxSize(), cfg.LogMaxFiles(), a.opts.Clock, log.With("component", "logs"))
	run(func() { rotator.Run(ctx, cfg.LogMonitorInterval()) })
	run(func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-a.opts.Reload:
				a.reload(imageGC, rotator)
			}
		}
	})
	run(func() {
		loop.Every(ctx, a.opts.Clock, runtimeCheckPeriod, func(ctx context.Context) { a.updateNodeStatus(ctx, rt, nodeStatus, recorder) })
	})

	statsProvider := &stats.Provider{
		NodeName: a.opts.NodeName, Tree: tree, Pods: store.List, RootDir: a.opts.RootDir, LogsDir: cfg.PodLogsDir,
		MemoryCapacity: machine.MemoryBytes, PIDMax: machine.PIDMax, DefaultInterface: machine.DefaultInterface, BootTime: machine.BootTime,
		KernelVersion: machine.KernelVersion,
		ContainerStats: func(ctx context.Context) ([]*runtimeapi.ContainerStats, error) {
			return rt.ListContainerStats(ctx, &runtimeapi.ContainerStatsFilter{})
		},
		ImageFs: rt.ImageFsInfo,
	}
	var summary func(context.Context) (any, error)
	var resourceMetrics, cadvisorMetrics prometheus.Gatherer
	if cad != nil {
		statsProvider.Cadvisor = cad
		summary = func(ctx context.Context) (any, error) { return statsProvider.Summary(ctx) }
		resourceMetrics, cadvisorMetrics = gatherer(statsProvider.ResourceMetrics()), gatherer(statsProvider.CadvisorMetrics())
		// CPU rates need an earlier reading, as cadvisor's housekeeping keeps.
		run(func() {
			loop.Every(ctx, a.opts.Clock, statsSamplePeriod, func(context.Context) { statsProvider.Sample() })
		})
	}

	var srv *http.Server
	if apiListener != nil {
		srv = server.NewServer(apiAddr, server.Handler(server.Sources{
			Pods:            store.List,
			Events:          recorder.List,
			Node:            func() *corev1.Node { return nodeStatus.Node(a.opts.Clock.Now()) },
			Config:          a.configz,
			Agent:           map[string]string{"controlSocket": a.opts.ControlSocket},
			Probes:          func(uid types.UID) any { return prober.Reports(uid) },
			Metrics:         metrics.registry(cache, prober.Metrics, evictor.Metrics),
			Summary:         summary,
			ResourceMetrics: resourceMetrics,
			CadvisorMetrics: cadvisorMetrics,
			Profiling:       cfg.EnableProfilingHandler != nil && *cfg.EnableProfilingHandler,
			Evictions:       func() any { return evictor.Traces() },
			Checks: []server.HealthCheck{
				{Name: "runtime", Check: func() error {
					if err := nodeStatus.RuntimeError(); err != "" {
						return fmt.Errorf("container runtime at %s is down: %s", cfg.ContainerRuntimeEndpoint, err)
					}
					return nil
				}},
				{Name: "pleg", Check: cache.Healthy},
				{Name: "cgroups", Check: tree.Healthy},
				{Name: "eviction", Check: evictor.Healthy},
			},
			Cgroups: func() (any, error) { return cgroupTree(tree, store) },
		}))
		run(func() {
			if err := srv.Serve(apiListener); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error("read-only API stopped", "err", err)
			}
		})
		log.Info("read-only API listening", "addr", "http://"+apiAddr, "endpoints", "/healthz /pods /pods/{ns}/{name}/probes /node /events /evictions /configz /metrics /metrics/resource /metrics/cadvisor /stats/summary /cgroups")
	}
	var ctl *http.Server
	if controlListener != nil {
		ctl = server.NewServer(a.opts.ControlSocket, server.ControlHandler(server.ControlSources{
			Control: controlOps{manager, fileSource},
			Config: func() any {
				return map[string]any{"kubeletconfig": a.configz(), "nodeagent": map[string]string{"controlSocket": a.opts.ControlSocket}}
			},
			IsNotFound:  func(err error) bool { return errors.Is(err, pods.ErrPodNotFound) },
			IsInvalid:   func(err error) bool { return errors.Is(err, source.ErrInvalidManifest) },
			MaxManifest: source.MaxManifestSize,
			UID:         uint32(os.Geteuid()),
		}))
		ctl.ConnContext = control.ConnContext
		run(func() {
			if err := ctl.Serve(controlListener); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error("control socket stopped", "err", err)
			}
		})
	}
	log.Info("nodeagent running", "node", a.opts.NodeName, "ip", nodeIP, "manifests", cfg.StaticPodPath, "version", version.Version)
	// Under systemd (Type=notify): ready now, and the watchdog is petted
	// only while relisting (and so the pod loops) and the eviction loop stay
	// healthy. A runtime that is down is not the agent's fault: a restart
	// would not mend it, so /healthz reports it instead.
	daemon.SdNotify(false, daemon.SdNotifyReady)
	if interval, err := daemon.SdWatchdogEnabled(false); err == nil && interval > 0 {
		run(func() {
			loop.Every(ctx, a.opts.Clock, interval/3, func(context.Context) {
				if err := errors.Join(cache.Healthy(), evictor.Healthy()); err != nil {
					log.Warn("not petting the systemd watchdog", "err", err)
					return
				}
				daemon.SdNotify(false, daemon.SdNotifyWatchdog)
			})
		})
	}

	<-ctx.Done()
	daemon.SdNotify(false, daemon.SdNotifyStopping)
	log.Info("shutting down; pods keep running")
	if srv != nil {
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		srv.Shutdown(shutdownCtx)
		cancel()
	}
	if ctl != nil {
		ctl.Close()
		os.Remove(a.opts.ControlSocket)
	}
	wg.Wait()
	return nil
}

// configz is the configuration in effect, honoured fields only.
func (a *Agent) configz() any {
	fields, err := a.effective.Load().HonouredFields()
	if err != nil {
		return map[string]string{"error": err.Error()}
	}
	return fields
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

func (c controlOps) ApplyManifest(data []byte) (server.ManifestResult, error) {
	name, file, result, err := c.files.Apply(data)
	return server.ManifestResult{Name: name, File: file, Result: result}, err
}

// reload re-reads the config file and applies its reloadable fields; a
// file that does not load leaves the running configuration as it is.
func (a *Agent) reload(imageGC *images.GC, rotator *logs.Rotator) {
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
	high, low := eff.ImageGCThresholds()
	imageGC.SetPolicy(images.Policy{HighThresholdPercent: high, LowThresholdPercent: low, MinAge: eff.ImageMinimumGCAge.Duration})
	rotator.SetLimits(eff.LogMaxSize(), eff.LogMaxFiles())
	a.effective.Store(eff)
	a.log.Info("config reloaded", "file", cur.File, "applied", reloadable)
	if len(restart) > 0 {
		a.log.Warn("config fields changed that take effect only after a restart (systemctl restart nodeagent)", "fields", restart)
	}
}

// checkDriverAgreement refuses to run when the runtime places containers
// with another cgroup driver than the agent's: pods would end up outside
// the tree the agent keeps. containerd says which in its verbose status.
func checkDriverAgreement(driver string, info map[string]string) error {
	var rc struct {
		Containerd struct {
			DefaultRuntimeName string `json:"defaultRuntimeName"`
			Runtimes           map[string]struct {
				Options map[string]any `json:"options"`
			} `json:"runtimes"`
		} `json:"containerd"`
		SystemdCgroup bool `json:"systemdCgroup"`
	}
	if err := json.Unmarshal([]byte(info["config"]), &rc); err != nil {
		return nil // a runtime that does not say: nothing to compare
	}
	systemdCgroup := rc.SystemdCgroup
	if rt, ok := rc.Containerd.Runtimes[rc.Containerd.DefaultRuntimeName]; ok {
		if v, ok := rt.Options["SystemdCgroup"].(bool); ok {
			systemdCgroup = systemdCgroup || v
		}
	}
	runtimeDriver := "cgroupfs"
	if systemdCgroup {
		runtimeDriver = "systemd"
	}
	if driver == "" {
		driver = "cgroupfs"
	}
	if driver != runtimeDriver {
		return fmt.Errorf("cgroup driver mismatch: nodeagent uses %q (cgroupDriver) but the container runtime uses %q (SystemdCgroup = %v): make them agree", driver, runtimeDriver, systemdCgroup)
	}
	return nil
}

// sandboxImage is the pause image the runtime reports in its verbose
// status, so image GC never removes it.
func sandboxImage(info map[string]string) string {
	var rc struct {
		SandboxImage string `json:"sandboxImage"`
	}
	json.Unmarshal([]byte(info["config"]), &rc)
	return rc.SandboxImage
}

// ensureNetwork makes the runtime's CNI directory hold a valid network.
// Problems are logged and show in the node's Ready condition (through the
// runtime's NetworkReady); they do not stop the agent.
func (a *Agent) ensureNetwork(ctx context.Context, info map[string]string) {
	confDir, binDirs := a.opts.CNIConfDir, a.opts.CNIBinDirs
	var rc struct {
		CNI struct {
			ConfDir string `json:"confDir"`
			BinDir  string `json:"binDir"`
		} `json:"cni"`
	}
	if err := json.Unmarshal([]byte(info["config"]), &rc); err == nil {
		if confDir == "" {
			confDir = rc.CNI.ConfDir
		}
		if len(binDirs) == 0 && rc.CNI.BinDir != "" {
			binDirs = []string{rc.CNI.BinDir}
		}
	}
	if confDir == "" {
		confDir = "/etc/cni/net.d"
	}
	if len(binDirs) == 0 {
		binDirs = []string{"/opt/cni/bin", "/usr/lib/cni"}
	}
	res, err := network.Ensure(ctx, confDir, binDirs, a.cfg.PodCIDR)
	switch {
	case err != nil:
		a.log.Error("pod network configuration", "err", err)
	case res.Written:
		a.log.Info("wrote pod network configuration", "file", res.File, "network", res.Name, "podCIDR", a.cfg.PodCIDR)
	default:
		a.log.Info("using existing pod network configuration", "file", res.File, "network", res.Name)
	}
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

// statsSamplePeriod is how often cgroups are read for CPU rates, the
// kubelet's cadvisor housekeeping interval.
const statsSamplePeriod = 10 * time.Second

// gatherer is a registry holding one collector.
func gatherer(c prometheus.Collector) prometheus.Gatherer {
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	return reg
}

// runtimeCheckPeriod is how often the runtime's status is read.
const runtimeCheckPeriod = 2 * time.Second

// updateNodeStatus reads RuntimeReady and NetworkReady from the runtime,
// and records node events when readiness changes, in the kubelet's words.
func (a *Agent) updateNodeStatus(ctx context.Context, rt *cri.Client, s *node.Status, rec *events.Recorder) {
	var runtimeErr, networkErr string
	if st, err := rt.Status(ctx, false); err != nil {
		runtimeErr = err.Error()
	} else {
		if c := cri.Condition(st.Status, "RuntimeReady"); c == nil || !c.Status {
			runtimeErr = "RuntimeReady=false " + conditionText(c)
		}
		if c := cri.Condition(st.Status, "NetworkReady"); c == nil || !c.Status {
			networkErr = "NetworkReady=false " + conditionText(c)
		}
	}
	ready, changed := s.SetRuntime(runtimeErr, networkErr, a.opts.Clock.Now())
	if !changed {
		return
	}
	if ready {
		a.log.Info("node is ready")
		rec.Eventf(rec.NodeRef(), corev1.EventTypeNormal, "NodeReady", "Node %s status is now: NodeReady", a.opts.NodeName)
		return
	}
	why := runtimeErr
	if why == "" {
		why = networkErr
	}
	a.log.Warn("node is not ready", "reason", why)
	rec.Eventf(rec.NodeRef(), corev1.EventTypeWarning, "NodeNotReady", "Node %s status is now: NodeNotReady (%s)", a.opts.NodeName, why)
}

func conditionText(c *runtimeapi.RuntimeCondition) string {
	if c == nil {
		return "reason:unknown"
	}
	return strings.TrimSpace(fmt.Sprintf("reason:%s message:%s", c.GetReason(), c.GetMessage()))
}

// imageFsMount asks the runtime where its images live.
func imageFsMount(rt *cri.Client) eviction.ImageFs {
	return func(ctx context.Context) (string, error) {
		fss, err := rt.ImageFsInfo(ctx)
		if err != nil {
			return "", err
		}
		for _, fs := range fss {
			if m := fs.GetFsId().GetMountpoint(); m != "" {
				return m, nil
			}
		}
		return "", nil
	}
}

// hostUsage measures pods for eviction: cgroups (through cadvisor for
// containers), their directories, and the runtime's writable layers.
func hostUsage(ctx context.Context, rt *cri.Client, tree *cgroups.Tree, manager *pods.Manager, cad *cgroups.Cadvisor, rootDir, logsDir string) eviction.HostUsage {
	u := eviction.HostUsage{Tree: tree, RootDir: rootDir, LogsDir: logsDir, Stats: cad,
		ContainerNames: manager.ContainerNames,
		WritableLayers: func(uid types.UID) (bytes, inodes int64, err error) {
			ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			stats, err := rt.ListContainerStats(ctx, &runtimeapi.ContainerStatsFilter{LabelSelector: map[string]string{cri.LabelPodUID: string(uid)}})
			for _, s := range stats {
				bytes += int64(s.GetWritableLayer().GetUsedBytes().GetValue())
				inodes += int64(s.GetWritableLayer().GetInodesUsed().GetValue())
			}
			return bytes, inodes, err
		},
	}
	// Writable layers count against nodefs when they live on it.
	if mount, err := imageFsMount(rt)(ctx); err == nil && mount != "" {
		u.ImageFsShared = sameFilesystem(rootDir, mount)
	}
	return u
}

// sameFilesystem tells whether two paths are on one device.
func sameFilesystem(a, b string) bool {
	var sa, sb unix.Stat_t
	return unix.Stat(a, &sa) == nil && unix.Stat(b, &sb) == nil && sa.Dev == sb.Dev
}

// oomMessage names the OOM killer's victim, its cgroup and pod, and whose
// limit was hit.
func oomMessage(k eviction.OOMKill, podOf func(types.UID) (*corev1.Pod, bool)) string {
	msg := fmt.Sprintf("Killed process %d (%s) in cgroup %s", k.PID, k.Process, k.TaskMemcg)
	// The admitted pod, not only a published status: a container killed
	// as it starts can go before its pod's first status.
	if uid := eviction.PodUIDFromCgroup(k.TaskMemcg); uid != "" {
		if pod, ok := podOf(types.UID(uid)); ok {
			msg += fmt.Sprintf(" (pod %s/%s)", pod.Namespace, pod.Name)
		}
	}
	if k.Constraint == "CONSTRAINT_MEMCG" {
		return msg + ": the memory limit of " + k.OOMMemcg + " was reached"
	}
	return msg + ": the node ran out of memory"
}

// watchMemoryPressure starts the kernel notifications that wake the
// eviction manager besides the memcg lines HostSource arms on cgroup v1:
// memory.high tripwires on cgroup v2 and PSI triggers on the node's and
// (v2) kubepods' memory pressure. The returned func stops them.
func watchMemoryPressure(mgr cgroups.Manager, tree *cgroups.Tree, evictor *eviction.Manager, signals *eviction.HostSource, log *slog.Logger) func() {
	var stops []func()
	if mgr.Version() == 2 {
		wires, err := eviction.NewTripwires(func(at time.Time) { evictor.NotifyAt(at, eviction.WokenByTripwire) })
		if err != nil {
			log.Warn("no memory.high tripwires; allocatableMemory.available is polled", "err", err)
		} else {
			stops = append(stops, wires.Close)
			signals.Tripwires = wires
		}
	}
	pressure := []string{"/proc/pressure/memory"}
	if mgr.Version() == 2 {
		pressure = append(pressure, filepath.Join(mgr.Path(tree.Kubepods()), "memory.pressure"))
	}
	for _, path := range pressure {
		psi, err := eviction.WatchPressure(path, func(at time.Time) { evictor.NotifyAt(at, eviction.WokenByPSI) })
		if err != nil {
			log.Warn("no PSI trigger; memory stalls there are seen by the poll only", "err", err)
			continue
		}
		log.Info("PSI trigger armed", "path", path, "trigger", psi.Trigger)
		stops = append(stops, psi.Close)
	}
	return func() {
		for _, stop := range stops {
			stop()
		}
	}
}
