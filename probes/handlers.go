package probes

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"nodeagent/internal/version"
)

// Result is a probe's verdict.
type Result int

const (
	Unknown Result = iota
	Success
	Failure
)

func (r Result) String() string {
	switch r {
	case Success:
		return "successful"
	case Failure:
		return "failed"
	}
	return "unknown"
}

// outcome is one run of a handler.
type outcome struct {
	result  Result
	warning bool   // a success with a warning (a redirect to another host)
	message string // the agent's words: the reason for failure
	// output is what the container said (exec output, an HTTP body),
	// after message. It may hold secrets: only the API server's events
	// and the debug log get it, never the read-only port.
	output string
}

// maxOutput caps what is kept of exec output and read of HTTP bodies.
const maxOutput = 10 << 10

// Target is where a container's probes and hooks are sent.
type Target struct {
	PodIP       string
	ContainerID string // the runtime's ID, without scheme
	Container   *corev1.Container
}

// Execer runs a command in a container and waits for it (*cri.Client).
type Execer interface {
	ExecSync(ctx context.Context, id string, cmd []string, timeout time.Duration) (*runtimeapi.ExecSyncResponse, error)
}

// Handlers runs probe and hook actions. HTTP requests share one transport
// without keep-alives whose sockets close with SO_LINGER 1 s, so probing
// leaves no TIME_WAIT sockets behind (kubernetes#89898).
type Handlers struct {
	exec      Execer
	transport *http.Transport
	dialer    *net.Dialer
}

// NewHandlers returns handlers that exec through exec.
func NewHandlers(exec Execer) *Handlers {
	dialer := &net.Dialer{Control: lingerControl}
	return &Handlers{
		exec:   exec,
		dialer: dialer,
		transport: &http.Transport{
			Proxy:               nil,
			DialContext:         dialer.DialContext,
			TLSClientConfig:     &tls.Config{InsecureSkipVerify: true},
			DisableKeepAlives:   true,
			DisableCompression:  true,
			TLSHandshakeTimeout: 10 * time.Second,
		},
	}
}

// lingerControl sets SO_LINGER to 1 s: close sends a RST after a second
// at most instead of leaving the socket in TIME_WAIT.
func lingerControl(_, _ string, c syscall.RawConn) error {
	var serr error
	err := c.Control(func(fd uintptr) {
		serr = syscall.SetsockoptLinger(int(fd), syscall.SOL_SOCKET, syscall.SO_LINGER, &syscall.Linger{Onoff: 1, Linger: 1})
	})
	if err != nil {
		return err
	}
	return serr
}

// probe runs p's handler once within its timeout.
func (h *Handlers) probe(ctx context.Context, p *corev1.Probe, t Target) outcome {
	timeout := time.Duration(p.TimeoutSeconds) * time.Second
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	switch {
	case p.Exec != nil:
		return h.execProbe(ctx, p.Exec.Command, t, timeout)
	case p.HTTPGet != nil:
		return h.httpProbe(ctx, p.HTTPGet, t, "kube-probe/"+version.Kubernetes)
	case p.TCPSocket != nil:
		return h.tcpProbe(ctx, p.TCPSocket, t, timeout)
	case p.GRPC != nil:
		return h.grpcProbe(ctx, p.GRPC, t, timeout)
	}
	return outcome{result: Unknown, message: "missing probe handler"}
}

// probeError shortens a transport error to what the user needs.
func probeError(err error) string {
	var uerr *url.Error
	if errors.As(err, &uerr) {
		if uerr.Timeout() {
			return fmt.Sprintf("Get %q: context deadline exceeded (Client.Timeout exceeded while awaiting headers)", uerr.URL)
		}
	}
	return err.Error()
}

// ResolvePort turns a probe or hook port into a number: a named port is
// looked up in the container's ports.
func ResolvePort(port intstr.IntOrString, c *corev1.Container) (int, error) {
	if port.Type == intstr.Int {
		if port.IntVal < 1 || port.IntVal > 65535 {
			return 0, fmt.Errorf("invalid port number: %d", port.IntVal)
		}
		return int(port.IntVal), nil
	}
	if c != nil {
		for _, p := range c.Ports {
			if p.Name == port.StrVal {
				return int(p.ContainerPort), nil
			}
		}
	}
	if n, err := strconv.Atoi(port.StrVal); err == nil && n >= 1 && n <= 65535 {
		return n, nil
	}
	return 0, fmt.Errorf("couldn't find port %q in container ports", port.StrVal)
}
