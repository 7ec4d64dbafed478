package launch

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"nodeagent/cri"
	"nodeagent/internal/mounts"
)

// ContainerdOptions say how to start a private containerd: a peer agent
// (the kubelet) gets one of its own, because the kubelet removes every
// pod of its runtime it does not own.
type ContainerdOptions struct {
	// RuntimeBin holds containerd, runc, the shim and cni/ (bin/runtime).
	RuntimeBin string
	// Dir is the root (images, snapshots, logs, CNI config); RunDir the
	// state and sockets, kept short for the socket path's limit.
	Dir, RunDir string
	// Registry and PauseImage are the project's (REGISTRY, PAUSE_IMAGE).
	Registry, PauseImage string
	// Bridge and Subnet are the pods' CNI network, apart from the
	// nodeagent runtime's nodeagent0 and 10.88.0.0/16.
	Bridge, Subnet string
}

// Containerd is a private containerd started from the project's own
// configuration template (deploy/containerd), so that a peer runs on the
// same runtime, built the same way, as nodeagent.
type Containerd struct {
	ContainerdOptions
	Socket string
	cmd    *exec.Cmd
	done   chan struct{}
	log    *os.File
}

// NewContainerd writes the runtime's configuration; Start runs it.
func NewContainerd(opts ContainerdOptions) (*Containerd, error) {
	if opts.RuntimeBin == "" || opts.Dir == "" || opts.RunDir == "" || opts.Registry == "" || opts.PauseImage == "" ||
		opts.Bridge == "" || opts.Subnet == "" {
		return nil, errors.New("launch: containerd needs RuntimeBin, Dir, RunDir, Registry, PauseImage, Bridge and Subnet")
	}
	for _, bin := range []string{"containerd", "containerd-shim-runc-v2", "runc", "cni/bridge"} {
		if _, err := os.Stat(filepath.Join(opts.RuntimeBin, bin)); err != nil {
			return nil, fmt.Errorf("launch: the runtime's %s is missing in %s (make runtime-up builds it)", bin, opts.RuntimeBin)
		}
	}
	config, err := RepoFile("deploy/containerd/config.toml.in")
	if err != nil {
		return nil, err
	}
	hosts, err := RepoFile("deploy/containerd/hosts.toml.in")
	if err != nil {
		return nil, err
	}
	c := &Containerd{ContainerdOptions: opts, Socket: filepath.Join(opts.RunDir, "containerd.sock")}
	fill := strings.NewReplacer("@ROOT@", opts.Dir, "@RUN@", opts.RunDir, "@REGISTRY@", opts.Registry,
		"@PAUSE_IMAGE@", opts.PauseImage, "@RESTRICT_OOM@", restrictOOM(), "@RUNTIME_BIN@", opts.RuntimeBin)
	netDir := filepath.Join(opts.Dir, "cni", "net.d")
	certs := filepath.Join(opts.Dir, "certs.d", opts.Registry)
	for _, d := range []string{netDir, certs, opts.RunDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	for _, f := range []struct{ from, to string }{{config, filepath.Join(opts.Dir, "containerd.toml")}, {hosts, filepath.Join(certs, "hosts.toml")}} {
		b, err := os.ReadFile(f.from)
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(f.to, []byte(fill.Replace(string(b))), 0o644); err != nil {
			return nil, err
		}
	}
	// The plugin chain of nodeagent's own network (network.BridgeConfList),
	// so that both sides pay the same for a sandbox's network; the
	// masquerade rules go with each pod's CNI DEL, and the addresses are
	// kept in Dir, not in /var/lib/cni.
	network := fmt.Sprintf(`{"cniVersion": "1.0.0", "name": "%s", "plugins": [
  {"type": "bridge", "bridge": "%s", "isGateway": true, "ipMasq": true, "hairpinMode": true, "forceAddress": true,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": "%s"}]], "routes": [{"dst": "0.0.0.0/0"}], "dataDir": "%s"}},
  {"type": "portmap", "capabilities": {"portMappings": true}},
  {"type": "loopback"}]}
`, opts.Bridge, opts.Bridge, opts.Subnet, filepath.Join(opts.Dir, "cni", "ipam"))
	if err := os.WriteFile(filepath.Join(netDir, "10-"+opts.Bridge+".conflist"), []byte(network), 0o644); err != nil {
		return nil, err
	}
	return c, nil
}

// Endpoint is the CRI endpoint (unix://...).
func (c *Containerd) Endpoint() string { return "unix://" + c.Socket }

// Start runs containerd and waits until its CRI answers.
func (c *Containerd) Start(ctx context.Context, timeout time.Duration) error {
	log, err := os.OpenFile(filepath.Join(c.Dir, "containerd.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(filepath.Join(c.RuntimeBin, "containerd"), "--config", filepath.Join(c.Dir, "containerd.toml"))
	cmd.Stdout, cmd.Stderr = log, log
	// Its own process group: a Ctrl-C meant for the bench is not its.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		log.Close()
		return fmt.Errorf("start containerd: %w", err)
	}
	c.cmd, c.log, c.done = cmd, log, make(chan struct{})
	go func() { cmd.Wait(); close(c.done) }()
	deadline := time.Now().Add(timeout)
	for {
		rt, err := cri.New(c.Endpoint(), cri.Options{Timeout: 2 * time.Second})
		if err == nil {
			_, err = rt.Version(ctx)
			rt.Close()
			if err == nil {
				return nil
			}
		}
		select {
		case <-c.done:
			return fmt.Errorf("containerd exited: %s", tailFile(log.Name(), 5))
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			c.Stop()
			return fmt.Errorf("containerd did not answer within %s: %s", timeout, tailFile(log.Name(), 5))
		}
	}
}

// RemovePods stops and removes every pod sandbox of this runtime: what a
// peer left when it stopped. Only this containerd's pods: it is ours. A
// peer still running may be removing some itself (its garbage collection
// races ours), so it tries again until none is left or ctx ends.
func (c *Containerd) RemovePods(ctx context.Context) error {
	rt, err := cri.New(c.Endpoint(), cri.Options{Timeout: time.Minute})
	if err != nil {
		return err
	}
	defer rt.Close()
	var last error
	for {
		sbs, err := rt.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{})
		if err != nil {
			return err
		}
		if len(sbs) == 0 {
			return nil
		}
		for _, sb := range sbs {
			if err := rt.StopPodSandbox(ctx, sb.Id); err != nil {
				last = err
			}
			if err := rt.RemovePodSandbox(ctx, sb.Id); err != nil {
				last = err
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d pod sandboxes left: %w", len(sbs), errors.Join(last, ctx.Err()))
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// Stop ends containerd, then removes what it leaves on the host: its
// mounts under both directories, its state directory and the pods'
// bridge. Remove its pods first (RemovePods); the root is kept (Dir).
func (c *Containerd) Stop() error {
	var errs []error
	if c.cmd != nil {
		if !Terminate(c.cmd.Process, c.done, 20*time.Second) {
			errs = append(errs, errors.New("containerd did not stop within 20 s of SIGTERM"))
		}
		c.log.Close()
		c.cmd = nil
	}
	for _, d := range []string{c.RunDir, c.Dir} {
		if err := mounts.UnmountTree(d); err != nil {
			errs = append(errs, err)
		}
	}
	if err := os.RemoveAll(c.RunDir); err != nil {
		errs = append(errs, err)
	}
	if err := exec.Command("ip", "link", "show", c.Bridge).Run(); err == nil {
		if out, err := exec.Command("ip", "link", "delete", c.Bridge).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("ip link delete %s: %v: %s", c.Bridge, err, out))
		}
	}
	return errors.Join(errs...)
}

// restrictOOM is "true" when this host refuses a lower oom_score_adj (no
// CAP_SYS_RESOURCE), as hack/runtime.sh decides for the main runtime.
func restrictOOM() string {
	if exec.Command("sh", "-c", "echo -999 > /proc/self/oom_score_adj").Run() == nil {
		return "false"
	}
	return "true"
}

// RepoFile finds a file of the repository (by its path from the root)
// from the working directory or one of its parents: the bench programs
// run at the root, the tests in their package's directory.
func RepoFile(rel string) (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		p := filepath.Join(dir, rel)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("launch: %s not found from the working directory up", rel)
		}
		dir = parent
	}
}
