package launch

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// ControlPlane is a real kube-apiserver, scheduler and controller manager
// (hack/controlplane's `run`, built from k8s.io/kubernetes) in a directory
// of its own, for the API-mode tests and benchmarks.
type ControlPlane struct {
	Bin, Dir string
	Port     int
	// Admin is the cluster-admin kubeconfig; Config and Client use it.
	Admin  string
	Config *rest.Config
	Client kubernetes.Interface
	// SigningDuration, if set, is the lifetime of the certificates the
	// controller manager signs (short ones exercise rotation).
	SigningDuration time.Duration

	cmd  *exec.Cmd
	done chan struct{}
	log  *os.File
}

// NewControlPlane prepares a control plane of bin in dir on a free port;
// Start runs it.
func NewControlPlane(bin, dir string) (*ControlPlane, error) {
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	return &ControlPlane{Bin: bin, Dir: dir, Port: port, Admin: filepath.Join(dir, "admin.kubeconfig")}, nil
}

// LogPath is where the control plane's components log.
func (cp *ControlPlane) LogPath() string { return filepath.Join(cp.Dir, "controlplane.log") }

// Start runs the control plane and waits (up to timeout) for its ready
// line. It can be called again after Stop: the state in Dir is kept.
func (cp *ControlPlane) Start(timeout time.Duration) error {
	log, err := os.OpenFile(cp.LogPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	args := []string{"run", "--dir", cp.Dir, "--port", fmt.Sprint(cp.Port)}
	if cp.SigningDuration > 0 {
		args = append(args, "--signing-duration", cp.SigningDuration.String())
	}
	cmd := exec.Command(cp.Bin, args...)
	cmd.Stderr = log
	out, err := cmd.StdoutPipe()
	if err != nil {
		log.Close()
		return err
	}
	if err := cmd.Start(); err != nil {
		log.Close()
		return fmt.Errorf("control plane: %w", err)
	}
	cp.cmd, cp.log, cp.done = cmd, log, make(chan struct{})
	ready := make(chan struct{}, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "KUBECONFIG=") {
				select { // a second ready line must not stop the draining
				case ready <- struct{}{}:
				default:
				}
			}
		}
		io.Copy(io.Discard, out)
	}()
	go func() { cmd.Wait(); close(cp.done) }()
	select {
	case <-ready:
	case <-cp.done:
		return fmt.Errorf("control plane exited before it was ready; log %s", cp.LogPath())
	case <-time.After(timeout):
		cp.Stop()
		return fmt.Errorf("control plane not ready within %s; log %s", timeout, cp.LogPath())
	}
	if cp.Config, err = clientcmd.BuildConfigFromFlags("", cp.Admin); err != nil {
		return err
	}
	cp.Client, err = kubernetes.NewForConfig(cp.Config)
	return err
}

// Stop ends the control plane with SIGTERM, as an operator would, and
// kills it after a minute.
func (cp *ControlPlane) Stop() {
	if cp.cmd == nil {
		return
	}
	Terminate(cp.cmd.Process, cp.done, time.Minute)
	cp.log.Close()
	cp.cmd = nil
}

// CAFile is the cluster's CA: it signs the API server's client
// certificate for kubelets (authentication.x509.clientCAFile).
func (cp *ControlPlane) CAFile() string { return filepath.Join(cp.Dir, "pki", "ca.crt") }

// BootstrapKubeconfig makes a bootstrap token and writes its kubeconfig
// into file: a node joins with it through TLS bootstrap.
func (cp *ControlPlane) BootstrapKubeconfig(file string) error {
	out, err := exec.Command(cp.Bin, "bootstrap-kubeconfig", "--dir", cp.Dir, "--out", file).CombinedOutput()
	if err != nil {
		return fmt.Errorf("controlplane bootstrap-kubeconfig: %v: %s", err, out)
	}
	return nil
}

// NodeKubeconfig issues the client kubeconfig of a node (user
// system:node:<node>, which the Node authorizer confines) into file.
func (cp *ControlPlane) NodeKubeconfig(node, file string) error {
	out, err := exec.Command(cp.Bin, "kubeconfig", "--dir", cp.Dir, "--node", node, "--out", file).CombinedOutput()
	if err != nil {
		return fmt.Errorf("controlplane kubeconfig: %v: %s", err, out)
	}
	return nil
}
