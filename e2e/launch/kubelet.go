package launch

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"nodeagent/e2e/standin"
	"nodeagent/internal/mounts"
)

// KubeletOptions say how to start the real kubelet beside nodeagent, as
// the peer the benchmarks, experiments and upstream control runs measure.
// Bin, RuntimeBin, Dir, Registry and PauseImage are required.
type KubeletOptions struct {
	Bin        string // the kubelet (make kubelet: bin/upstream/kubelet)
	RuntimeBin string // containerd, runc, CNI plugins (bin/runtime)
	// Dir holds config.yaml, manifests/, logs/, root/, pki/, containerd/
	// and kubelet.log.
	Dir                  string
	Registry, PauseImage string
	NodeName             string // default "kubelet-<random>"
	CgroupRoot           string // default "/<NodeName>"; "/" puts kubepods at the top, as the upstream suite expects
	// Port (authenticated API, anonymous allowed on loopback),
	// ReadOnlyPort and HealthzPort: default free ports.
	Port, ReadOnlyPort, HealthzPort int
	// Address is where its ports listen (default 127.0.0.1; healthz stays
	// on loopback).
	Address string
	// RootDir and PodLogsDir default to Dir/root and Dir/logs; the upstream
	// suite reads /var/lib/kubelet and /var/log/pods.
	RootDir, PodLogsDir string
	// Args are more flags (--node-ip, ...).
	Args []string
	// Bridge and Subnet are the pods' network on its containerd; default
	// kubelet0 and 10.89.0.0/16.
	Bridge, Subnet string
	// Config is more KubeletConfiguration fields (YAML), after the
	// launcher's.
	Config string
	// Kubeconfig joins the kubelet to a control plane (ControlPlane's
	// NodeKubeconfig); empty: standalone, static pods only. A standalone
	// kubelet never evicts: it takes static pods for critical ones.
	Kubeconfig string
	// Verbosity is the kubelet's -v (default 0, as in production).
	Verbosity int
	// FileCheckFrequency is the static pod directory's rescan period
	// (default the kubelet's 20 s; it watches with inotify too).
	FileCheckFrequency time.Duration
	// Unit, when set, is a stand-in unit file (e2e/standin) written at
	// Start: the kubelet runs as that unit, which the upstream suite's
	// systemctl stand-in stops and restarts, on UnitConfig once the suite
	// has written it there. Its exits then leave the containerd up.
	Unit, UnitConfig string
}

// Kubelet is one real kubelet with a containerd of its own: the kubelet
// removes every pod of its runtime it did not create, so it never shares
// nodeagent's. Stop leaves the host as Start found it: pods, cgroups,
// mounts, the kernel settings it writes, the paths it creates outside its
// directories.
type Kubelet struct {
	KubeletOptions
	ConfigFile, Manifests, LogsDir, RootDir string
	Runtime                                 *Containerd

	cmd     *exec.Cmd
	unit    *standin.Unit
	done    chan struct{}
	log     *os.File
	sysctls sysctlSnapshot
	paths   pathSnapshot
}

// kubeletSysctls are the kernel settings the kubelet writes at start with
// protectKernelDefaults off (cm.setupKernelTunables): restored at Stop.
var kubeletSysctls = []string{"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops",
	"kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes"}

// kubeletHostPaths are what the kubelet makes outside its root directory
// whatever its configuration: the device plugins' socket directory is a
// constant of the plugin API, the legacy log links' directory a constant
// of kuberuntime (it also sets that directory's mode).
var kubeletHostPaths = []string{"/var/lib/kubelet", "/var/lib/kubelet/device-plugins",
	"/var/lib/kubelet/device-plugins/kubelet.sock", "/var/lib/kubelet/device-plugins/kubelet_internal_checkpoint",
	legacyLogLinks}

// NewKubelet fills in the defaults and writes the configurations (the
// kubelet's and its containerd's); Start runs both.
func NewKubelet(opts KubeletOptions) (*Kubelet, error) {
	if opts.Bin == "" || opts.RuntimeBin == "" || opts.Dir == "" || opts.Registry == "" || opts.PauseImage == "" {
		return nil, errors.New("launch: the kubelet needs Bin, RuntimeBin, Dir, Registry and PauseImage")
	}
	if _, err := os.Stat(opts.Bin); err != nil {
		return nil, fmt.Errorf("launch: the kubelet %s is missing (make kubelet builds it)", opts.Bin)
	}
	if err := fillIdentity(&opts.Dir, &opts.NodeName, &opts.CgroupRoot, "kubelet-", &opts.Port, &opts.ReadOnlyPort, &opts.HealthzPort); err != nil {
		return nil, err
	}
	if opts.Bridge == "" {
		opts.Bridge = "kubelet0"
	}
	if opts.Subnet == "" {
		opts.Subnet = "10.89.0.0/16"
	}
	if opts.FileCheckFrequency <= 0 {
		opts.FileCheckFrequency = 20 * time.Second
	}
	if opts.Address == "" {
		opts.Address = "127.0.0.1"
	}
	if opts.RootDir == "" {
		opts.RootDir = filepath.Join(opts.Dir, "root")
	}
	if opts.PodLogsDir == "" {
		opts.PodLogsDir = filepath.Join(opts.Dir, "logs")
	}
	k := &Kubelet{KubeletOptions: opts, ConfigFile: filepath.Join(opts.Dir, "config.yaml"),
		Manifests: filepath.Join(opts.Dir, "manifests"), LogsDir: opts.PodLogsDir, RootDir: opts.RootDir}
	for _, d := range []string{k.Manifests, k.LogsDir, k.RootDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	rt, err := NewContainerd(ContainerdOptions{RuntimeBin: opts.RuntimeBin, Dir: filepath.Join(opts.Dir, "containerd"),
		RunDir: filepath.Join("/run", "nodeagent-peer-"+opts.NodeName), Registry: opts.Registry, PauseImage: opts.PauseImage,
		Bridge: opts.Bridge, Subnet: opts.Subnet})
	if err != nil {
		return nil, err
	}
	k.Runtime = rt
	config := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
containerRuntimeEndpoint: %s
staticPodPath: %s
fileCheckFrequency: %s
podLogsDir: %s
volumePluginDir: %s
cgroupDriver: cgroupfs
cgroupRoot: %s
# This host is cgroup v1 and may have swap; the kubelet refuses both by
# default.
failCgroupV1: false
failSwapOn: false
address: %s
port: %d
readOnlyPort: %d
healthzBindAddress: 127.0.0.1
healthzPort: %d
# Standalone: no API server to review tokens, so anonymous on loopback.
authentication:
  webhook: {enabled: false}
  anonymous: {enabled: true}
authorization: {mode: AlwaysAllow}
# No KUBE-FIREWALL or hint chains: nothing in iptables outlives the run.
makeIPTablesUtilChains: false
`, rt.Endpoint(), k.Manifests, opts.FileCheckFrequency, k.LogsDir, filepath.Join(opts.Dir, "volume-plugins"),
		opts.CgroupRoot, opts.Address, opts.Port, opts.ReadOnlyPort, opts.HealthzPort)
	config, err = withConfig(config, opts.Config)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(k.ConfigFile, []byte(config), 0o644); err != nil {
		return nil, err
	}
	return k, nil
}

// Start runs the kubelet's containerd, then the kubelet, and waits until
// its /healthz passes, for at most timeout. On failure nothing is left
// running.
func (k *Kubelet) Start(ctx context.Context, timeout time.Duration) (err error) {
	if k.cmd != nil || k.unit != nil {
		return errors.New("launch: the kubelet is running")
	}
	k.sysctls = takeSysctls(kubeletSysctls)
	k.paths = takePaths(kubeletHostPaths)
	if err := k.makeCgroupRoot(); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			k.Stop()
		}
	}()
	if err := k.Runtime.Start(ctx, 30*time.Second); err != nil {
		return err
	}
	argv := []string{k.Bin, "--config", k.ConfigFile, "--root-dir", k.RootDir, "--cert-dir", filepath.Join(k.Dir, "pki"),
		"--hostname-override", k.NodeName, "-v", strconv.Itoa(k.Verbosity)}
	argv = append(argv, k.Args...)
	if k.Kubeconfig != "" {
		argv = append(argv, "--kubeconfig", k.Kubeconfig)
	}
	if k.Unit != "" {
		err = k.startUnit(argv)
	} else {
		err = k.startProcess(argv)
	}
	if err != nil {
		return err
	}
	deadline := time.Now().Add(timeout)
	for {
		if k.Healthz() == nil {
			return nil
		}
		if !k.running() {
			return fmt.Errorf("the kubelet exited: %s", tailFile(k.LogPath(), 5))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the kubelet was not healthy within %s: %s", timeout, tailFile(k.LogPath(), 5))
		}
	}
}

// startProcess runs the kubelet as this process's child.
func (k *Kubelet) startProcess(argv []string) error {
	log, err := os.OpenFile(k.LogPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		log.Close()
		return fmt.Errorf("start %s: %w", k.Bin, err)
	}
	k.cmd, k.log, k.done = cmd, log, make(chan struct{})
	go func() { cmd.Wait(); close(k.done) }()
	return nil
}

// running reports whether the kubelet's process is up.
func (k *Kubelet) running() bool {
	if k.unit != nil {
		return k.unit.Running()
	}
	select {
	case <-k.done:
		return false
	default:
		return k.cmd != nil
	}
}

// Healthz asks the kubelet's healthz port.
func (k *Kubelet) Healthz() error {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(k.ReadOnlyURL("/healthz", k.HealthzPort))
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("kubelet healthz: %s", resp.Status)
	}
	return nil
}

// ReadOnlyURL is a path on one of the kubelet's plain-HTTP ports (the
// read-only port when port is 0), reached on loopback unless it listens
// on one address only.
func (k *Kubelet) ReadOnlyURL(path string, port int) string {
	host := "127.0.0.1" // healthz listens there whatever Address is
	if port == 0 {
		port = k.ReadOnlyPort
		if a := net.ParseIP(k.Address); a != nil && !a.IsUnspecified() {
			host = k.Address
		}
	}
	return "http://" + net.JoinHostPort(host, strconv.Itoa(port)) + path
}

// LogPath is where the kubelet's output goes.
func (k *Kubelet) LogPath() string { return filepath.Join(k.Dir, "kubelet.log") }

// Pid is the running kubelet's process ID (0 when none runs).
func (k *Kubelet) Pid() int {
	if k.unit != nil {
		return k.unit.PID()
	}
	if k.cmd == nil {
		return 0
	}
	return k.cmd.Process.Pid
}

// Exited is closed when the kubelet's process ends; never as a unit,
// which the suite restarts.
func (k *Kubelet) Exited() <-chan struct{} { return k.done }

// Stop ends the kubelet, removes what pods it left through its runtime,
// stops that runtime and puts the host back: the kernel settings, the
// paths it made outside its directories, its cgroups and mounts. The
// directory is kept (logs); remove it after.
func (k *Kubelet) Stop() error {
	var errs []error
	if k.cmd != nil {
		Terminate(k.cmd.Process, k.done, 30*time.Second)
		k.log.Close()
		k.cmd = nil
	}
	if k.unit != nil {
		k.stopUnit()
	}
	if k.Runtime.cmd != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		if err := k.Runtime.RemovePods(ctx); err != nil {
			errs = append(errs, fmt.Errorf("removing the kubelet's pods: %w", err))
		}
		cancel()
	}
	if err := k.Runtime.Stop(); err != nil {
		errs = append(errs, err)
	}
	if err := removeLinksInto(legacyLogLinks, k.LogsDir); err != nil {
		errs = append(errs, err)
	}
	if err := mounts.UnmountTree(k.RootDir); err != nil {
		errs = append(errs, err)
	}
	if err := k.sysctls.restore(); err != nil {
		errs = append(errs, err)
	}
	if err := k.paths.restore(); err != nil {
		errs = append(errs, err)
	}
	// With the host's root as its own, its tree is kubepods.
	root := k.CgroupRoot
	if filepath.Clean("/"+root) == "/" {
		root = "/kubepods"
	}
	removeCgroupRoot(root)
	return errors.Join(errs...)
}

// legacyLogLinks is where the kubelet links each container's log (a
// constant of kuberuntime); it removes a link only with its container, so
// the links of the pods removed after it stopped stay.
const legacyLogLinks = "/var/log/containers"

// removeLinksInto removes the symbolic links in dir that point below target.
func removeLinksInto(dir, target string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var errs []error
	for _, e := range entries {
		if e.Type()&os.ModeSymlink == 0 {
			continue
		}
		p := filepath.Join(dir, e.Name())
		if to, err := os.Readlink(p); err == nil && strings.HasPrefix(to, target+"/") {
			if err := os.Remove(p); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// makeCgroupRoot creates the cgroup root in every hierarchy: the kubelet
// refuses a root missing in any v1 one. A v1 cpuset starts empty and
// takes its parent's CPUs and memory nodes.
func (k *Kubelet) makeCgroupRoot() error {
	if filepath.Clean("/"+k.CgroupRoot) == "/" {
		return nil // the host's root: there already (the upstream suite's layout)
	}
	dirs, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", "*", "cgroup.procs"))
	var hier []string
	for _, f := range dirs {
		hier = append(hier, filepath.Dir(f))
	}
	if len(hier) == 0 { // the unified hierarchy at /sys/fs/cgroup
		hier = []string{"/sys/fs/cgroup"}
	}
	for _, h := range hier {
		dir := filepath.Join(h, k.CgroupRoot)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("cgroup root %s: %w", dir, err)
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			if filepath.Base(h) != "cpuset" {
				continue
			}
			b, err := os.ReadFile(filepath.Join(filepath.Dir(dir), f))
			if err == nil {
				err = os.WriteFile(filepath.Join(dir, f), b, 0o644)
			}
			if err != nil {
				return fmt.Errorf("cgroup root %s: %w", dir, err)
			}
		}
	}
	return nil
}

// removeCgroupRoot removes root in every hierarchy, deepest first; only
// empty cgroups go.
func removeCgroupRoot(root string) {
	if filepath.Clean("/"+root) == "/" {
		return
	}
	dirs, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", "*", root))
	dirs = append(dirs, filepath.Join("/sys/fs/cgroup", root))
	for _, d := range dirs {
		removeTree(d)
	}
}
