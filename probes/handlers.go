package probes

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"nodeagent/internal/expand"
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
	message string // output or the reason for failure
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

// execProbe runs the command through the runtime; exit 0 is success and a
// timeout is a failure (ExecProbeTimeout, locked on in the kubelet).
func (h *Handlers) execProbe(ctx context.Context, command []string, t Target, timeout time.Duration) outcome {
	cmd := expandCommand(command, t.Container)
	resp, err := h.exec.ExecSync(ctx, t.ContainerID, cmd, timeout)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return outcome{result: Failure, message: fmt.Sprintf("command %q timed out", strings.Join(cmd, " "))}
		}
		return outcome{result: Unknown, message: err.Error()}
	}
	out := execOutput(resp)
	if resp.ExitCode != 0 {
		msg := fmt.Sprintf("command %q exited with %d: %s", strings.Join(cmd, " "), resp.ExitCode, strings.TrimSpace(string(out)))
		return outcome{result: Failure, message: msg}
	}
	return outcome{result: Success, message: string(out)}
}

// execOutput is stdout then stderr, capped at maxOutput.
func execOutput(resp *runtimeapi.ExecSyncResponse) []byte {
	out := append(append([]byte{}, resp.Stdout...), resp.Stderr...)
	if len(out) > maxOutput {
		out = out[:maxOutput]
	}
	return out
}

// expandCommand expands $(VAR) with the container's static env values,
// the only ones a probe command may use, as the kubelet does.
func expandCommand(command []string, c *corev1.Container) []string {
	var env []corev1.EnvVar
	if c != nil {
		env = c.Env
	}
	lookup := expand.Mapping(env)
	out := make([]string, len(command))
	for i, s := range command {
		out[i] = expand.Vars(s, lookup)
	}
	return out
}

// httpRequest builds the request the kubelet's prober would send.
func httpRequest(ctx context.Context, g *corev1.HTTPGetAction, t Target, userAgent string) (*http.Request, error) {
	port, err := ResolvePort(g.Port, t.Container)
	if err != nil {
		return nil, err
	}
	host := g.Host
	if host == "" {
		host = t.PodIP
	}
	scheme := strings.ToLower(string(g.Scheme))
	if scheme == "" {
		scheme = "http"
	}
	path := g.Path
	if path != "" && !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	u, err := url.Parse(scheme + "://" + net.JoinHostPort(host, strconv.Itoa(port)) + path)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("User-Agent", userAgent)
	req.Header.Set("Accept", "*/*")
	// The user's headers replace the defaults; an empty value removes
	// one (an explicit empty Accept sends none); Host sets the request's.
	replaced := map[string]bool{}
	for _, hdr := range g.HTTPHeaders {
		name := http.CanonicalHeaderKey(hdr.Name)
		if name == "Host" {
			req.Host = hdr.Value
			continue
		}
		if !replaced[name] {
			req.Header.Del(name)
			replaced[name] = true
		}
		if hdr.Value != "" {
			req.Header.Add(name, hdr.Value)
		}
	}
	return req, nil
}

// httpProbe: 200-399 is success; redirects are followed on the same host
// (up to 10) and a redirect elsewhere is a success with a warning.
func (h *Handlers) httpProbe(ctx context.Context, g *corev1.HTTPGetAction, t Target, userAgent string) outcome {
	req, err := httpRequest(ctx, g, t, userAgent)
	if err != nil {
		return outcome{result: Failure, message: err.Error()}
	}
	client := &http.Client{Transport: h.transport, CheckRedirect: sameHostRedirects}
	resp, err := client.Do(req)
	if err != nil {
		return outcome{result: Failure, message: probeError(err)}
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxOutput))
	if resp.StatusCode >= http.StatusOK && resp.StatusCode < http.StatusBadRequest {
		if resp.StatusCode >= http.StatusMultipleChoices {
			return outcome{result: Success, warning: true, message: fmt.Sprintf("Probe terminated redirects, Response body: %s", body)}
		}
		return outcome{result: Success, message: string(body)}
	}
	return outcome{result: Failure, message: fmt.Sprintf("HTTP probe failed with statuscode: %d", resp.StatusCode)}
}

func sameHostRedirects(req *http.Request, via []*http.Request) error {
	if req.URL.Hostname() != via[0].URL.Hostname() {
		return http.ErrUseLastResponse
	}
	if len(via) >= 10 {
		return errors.New("stopped after 10 redirects")
	}
	return nil
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

func (h *Handlers) tcpProbe(ctx context.Context, s *corev1.TCPSocketAction, t Target, timeout time.Duration) outcome {
	port, err := ResolvePort(s.Port, t.Container)
	if err != nil {
		return outcome{result: Failure, message: err.Error()}
	}
	host := s.Host
	if host == "" {
		host = t.PodIP
	}
	conn, err := h.dialer.DialContext(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return outcome{result: Failure, message: fmt.Sprintf("dial tcp %s: %v", net.JoinHostPort(host, strconv.Itoa(port)), errors.Unwrap(err))}
	}
	conn.Close()
	return outcome{result: Success}
}

// grpcProbe calls grpc.health.v1.Health/Check; SERVING is success.
func (h *Handlers) grpcProbe(ctx context.Context, g *corev1.GRPCAction, t Target, timeout time.Duration) outcome {
	service := ""
	if g.Service != nil {
		service = *g.Service
	}
	addr := net.JoinHostPort(t.PodIP, strconv.Itoa(int(g.Port)))
	conn, err := grpc.NewClient(addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithUserAgent("kube-probe/"+version.Kubernetes),
		grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) {
			return h.dialer.DialContext(ctx, "tcp", a)
		}))
	if err != nil {
		return outcome{result: Failure, message: err.Error()}
	}
	defer conn.Close()
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: service})
	if err != nil {
		if ctx.Err() != nil {
			return outcome{result: Failure, message: fmt.Sprintf("timeout: health rpc did not complete within %v", timeout)}
		}
		return outcome{result: Failure, message: fmt.Sprintf("error: health rpc probe failed: %v", err)}
	}
	if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		return outcome{result: Failure, message: fmt.Sprintf("service unhealthy (responded with %q)", resp.GetStatus())}
	}
	return outcome{result: Success, message: "service is serving"}
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
