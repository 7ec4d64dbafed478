// Command nodeagent is the node agent daemon: it runs the pods of its
// static manifest directory on the container runtime, inside the QoS cgroup
// tree. Configuration is a KubeletConfiguration file (--config); without
// one it runs on documented defaults. SIGINT or SIGTERM stop the agent and
// leave the pods running; the next start re-adopts them.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/klog/v2"

	"nodeagent/agent"
	"nodeagent/agent/config"
	"nodeagent/agent/volumes"
	"nodeagent/internal/control"
	"nodeagent/internal/version"
)

func main() {
	os.Exit(run())
}

func run() int {
	fs := flag.NewFlagSet("nodeagent", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `nodeagent runs the pods of a static manifest directory on a CRI runtime,
and with --kubeconfig joins a Kubernetes cluster as a node (API-server mode).

Usage: nodeagent [--config FILE] [--kubeconfig FILE] [flags]

The config file is a KubeletConfiguration (kubelet.config.k8s.io/v1beta1);
see examples/nodeagent.yaml for the fields nodeagent honours and their
defaults. SIGHUP re-reads it and applies the image GC and container log
fields; other changed fields are logged as needing a restart. SIGTERM and
SIGINT stop the agent and leave the pods running.

Flags:
`)
		fs.PrintDefaults()
	}
	configFile := fs.String("config", "", "KubeletConfiguration file (YAML or JSON); empty: defaults")
	nodeName := fs.String("hostname-override", "", "node name (default: the host name, lower-cased)")
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig `FILE` of the API server to join as a node (API-server mode); empty: standalone")
	bootstrapKubeconfig := fs.String("bootstrap-kubeconfig", "", "kubeconfig `FILE` with a bootstrap token: the node requests its client certificate (TLS bootstrap) and writes --kubeconfig pointing at it")
	certDir := fs.String("cert-dir", "", "directory of the TLS bootstrap's client certificates (default <root-dir>/pki)")
	nodeIP := fs.String("node-ip", "", "the node's IP address (default: the address of the default route's interface)")
	nodeLabels := fs.String("node-labels", "", "labels to add when registering the node, key=value,... (API-server mode)")
	rootDir := fs.String("root-dir", "/var/lib/nodeagent", "directory for the agent's state (pod volumes)")
	cniConfDir := fs.String("cni-conf-dir", "", "CNI configuration directory (default: what the runtime reports)")
	cniBinDir := fs.String("cni-bin-dir", "", "comma-separated CNI plugin directories (default: what the runtime reports)")
	controlSocket := fs.String("control-socket", control.DefaultSocket, "root-only unix socket nodectl acts through (apply, delete, logs, exec); empty disables it")
	imageGCPeriod := fs.Duration("image-gc-period", 5*time.Minute, "how often unused images are garbage-collected")
	evictionRanking := fs.String("eviction-ranking", "kubelet", "eviction order: kubelet (usage over request, priority, overage) or qos (BestEffort, Burstable, Guaranteed, then the kubelet's keys)")
	evictionPoll := fs.Duration("eviction-poll-period", time.Second, "how often the eviction manager reads the node's signals when no kernel notification woke it (at least 100ms)")
	evictionNice := fs.Int("eviction-thread-nice", -20, "niceness of the thread the eviction manager decides on, -20..19 (0 leaves it; raising needs CAP_SYS_NICE): a busy node's CPUs must not delay the decision")
	hardMemoryKill := fs.String("eviction-hard-memory-kill", "cgroup", "how the victims of hard memory thresholds end: cgroup (SIGKILL to every process of the pod through its cgroup at once, then the runtime is told) or runtime (the kubelet's: SIGTERM, 1 s, then SIGKILL through the runtime)")
	contentLimit := fs.String("pod-volume-content-limit", resource.NewQuantity(volumes.DefaultContentLimit, resource.BinarySI).String(), "the most a pod's configMap, secret, downwardAPI and projected volumes may hold together (a quantity; each file counts in 4 KiB pages); a volume past it is refused with FailedMount")
	releasePages := fs.Bool("release-binary-pages", true, "after start-up and after each burst of pod work, drop the mappings of the binary's pages the steady loops do not use (they stay in the page cache); false keeps them mapped")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	logFormat := fs.String("log-format", "text", "text or json")
	showVersion := fs.Bool("version", false, "print the version and exit")
	printDefaults := fs.Bool("print-default-config", false, "print the default KubeletConfiguration, as nodeagent fills it in, and exit")
	validate := fs.String("validate-config", "", "check a config `FILE` and exit: 0 when valid (ignored fields are listed), 1 with one line per error")
	if err := fs.Parse(os.Args[1:]); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "nodeagent: unexpected argument %q (flags start with --; see --help)\n", fs.Arg(0))
		return 2
	}
	if *showVersion {
		fmt.Println("nodeagent", version.Version)
		return 0
	}
	if *printDefaults {
		out, err := config.DefaultYAML()
		if err != nil {
			fmt.Fprintln(os.Stderr, "nodeagent:", err)
			return 1
		}
		os.Stdout.Write(out)
		return 0
	}
	if *validate != "" {
		return validateConfig(*validate)
	}

	if *nodeIP != "" {
		if ip := net.ParseIP(*nodeIP); ip == nil || ip.IsUnspecified() {
			fmt.Fprintf(os.Stderr, "nodeagent: --node-ip %q: want an IP address of this host\n", *nodeIP)
			return 2
		}
	}
	labels, err := config.ParseNodeLabels(*nodeLabels)
	if err != nil {
		fmt.Fprintf(os.Stderr, "nodeagent: --node-labels: %v\n", err)
		return 2
	}
	var clusterOpts *agent.ClusterOptions
	if *kubeconfig != "" {
		clusterOpts = &agent.ClusterOptions{Kubeconfig: *kubeconfig, NodeLabels: labels, BootstrapKubeconfig: *bootstrapKubeconfig, CertDir: *certDir}
	} else if *bootstrapKubeconfig != "" {
		fmt.Fprintln(os.Stderr, "nodeagent: --bootstrap-kubeconfig needs --kubeconfig (the file TLS bootstrap writes)")
		return 2
	} else if len(labels) > 0 {
		fmt.Fprintln(os.Stderr, "nodeagent: --node-labels needs --kubeconfig (labels are set on the Node in the API server)")
		return 2
	}
	if *evictionRanking != "kubelet" && *evictionRanking != "qos" {
		fmt.Fprintf(os.Stderr, "nodeagent: --eviction-ranking %q: want kubelet or qos\n", *evictionRanking)
		return 2
	}
	if *evictionNice < -20 || *evictionNice > 19 {
		fmt.Fprintf(os.Stderr, "nodeagent: --eviction-thread-nice %d: want -20..19\n", *evictionNice)
		return 2
	}
	if *hardMemoryKill != "cgroup" && *hardMemoryKill != "runtime" {
		fmt.Fprintf(os.Stderr, "nodeagent: --eviction-hard-memory-kill %q: want cgroup or runtime\n", *hardMemoryKill)
		return 2
	}
	if *evictionPoll < 100*time.Millisecond {
		fmt.Fprintf(os.Stderr, "nodeagent: --eviction-poll-period %s: want at least 100ms\n", *evictionPoll)
		return 2
	}
	limit, err := resource.ParseQuantity(*contentLimit)
	if err != nil || limit.Cmp(resource.MustParse("1Mi")) < 0 || limit.Cmp(resource.MustParse("64Gi")) > 0 {
		fmt.Fprintf(os.Stderr, "nodeagent: --pod-volume-content-limit %q: want a quantity from 1Mi to 64Gi\n", *contentLimit)
		return 2
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		fmt.Fprintf(os.Stderr, "nodeagent: --log-level %q: want debug, info, warn or error\n", *logLevel)
		return 2
	}
	hopts := &slog.HandlerOptions{Level: level}
	var handler slog.Handler
	switch *logFormat {
	case "text":
		handler = slog.NewTextHandler(os.Stderr, hopts)
	case "json":
		handler = slog.NewJSONHandler(os.Stderr, hopts)
	default:
		fmt.Fprintf(os.Stderr, "nodeagent: --log-format %q: want text or json\n", *logFormat)
		return 2
	}
	log := slog.New(handler)
	// Libraries that log through klog (cadvisor, client-go) write into the
	// same stream, in the same format.
	klog.SetSlogLogger(log.With("source", "klog"))

	cfg, err := config.Load(*configFile)
	if err != nil {
		fmt.Fprintln(os.Stderr, "nodeagent:", err)
		return 1
	}
	name := *nodeName
	if name == "" {
		host, err := os.Hostname()
		if err != nil {
			fmt.Fprintln(os.Stderr, "nodeagent: cannot read the host name; set --hostname-override:", err)
			return 1
		}
		name = strings.ToLower(host)
	}
	var binDirs []string
	if *cniBinDir != "" {
		binDirs = strings.Split(*cniBinDir, ",")
	}
	// SIGHUP reloads the config file's reloadable fields.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	reload := make(chan struct{})
	go func() {
		for range hup {
			reload <- struct{}{}
		}
	}()
	a, err := agent.New(cfg, agent.Options{NodeName: name, RootDir: *rootDir, CNIConfDir: *cniConfDir, CNIBinDirs: binDirs, ControlSocket: *controlSocket,
		ImageGCPeriod: *imageGCPeriod, EvictionRanking: *evictionRanking, EvictionPollPeriod: *evictionPoll, EvictionThreadNice: *evictionNice, EvictionGracefulHardMemory: *hardMemoryKill == "runtime", VolumeContentLimit: limit.Value(), KeepBinaryPages: !*releasePages, Reload: reload, Logger: log, Cluster: clusterOpts, NodeIP: *nodeIP})
	if err != nil {
		fmt.Fprintln(os.Stderr, "nodeagent:", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := a.Run(ctx); err != nil {
		log.Error("nodeagent cannot run", "err", err)
		return 1
	}
	return 0
}

// validateConfig prints what --validate-config found in file.
func validateConfig(file string) int {
	cfg, err := config.Load(file)
	if err != nil {
		// Load joins one error per field, each on its own line.
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	for _, w := range cfg.Warnings {
		fmt.Printf("%s: warning: %s\n", file, w)
	}
	fmt.Printf("%s: valid\n", file)
	return 0
}
