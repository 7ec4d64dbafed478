package cri

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Options tune a Client.
type Options struct {
	// Timeout bounds every call but image pulls (kubelet's
	// runtimeRequestTimeout, default 2m).
	Timeout time.Duration
	// PullTimeout bounds an image pull (default 10m).
	PullTimeout time.Duration
	// Observe, if set, is told of every unary call: its operation in the
	// kubelet's naming (run_podsandbox, list_containers, ...), its
	// duration and its error.
	Observe func(operation string, took time.Duration, err error)
}

// maxMsgSize matches the kubelet's limit for CRI messages.
const maxMsgSize = 16 << 20

// Client talks to one runtime endpoint.
type Client struct {
	endpoint    string
	conn        *grpc.ClientConn
	runtime     runtimeapi.RuntimeServiceClient
	images      runtimeapi.ImageServiceClient
	timeout     time.Duration
	pullTimeout time.Duration
}

// New prepares a client for endpoint ("unix:///path/to/socket"). It does not
// connect; the first call does, and fails fast with UnreachableError when
// nothing listens.
func New(endpoint string, opts Options) (*Client, error) {
	if !strings.HasPrefix(endpoint, "unix://") || len(endpoint) <= len("unix://") {
		return nil, fmt.Errorf("container runtime endpoint %q: want unix:///path/to/socket", endpoint)
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 2 * time.Minute
	}
	if opts.PullTimeout <= 0 {
		opts.PullTimeout = 10 * time.Minute
	}
	dial := []grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMsgSize), grpc.MaxCallSendMsgSize(maxMsgSize)),
	}
	if observe := opts.Observe; observe != nil {
		dial = append(dial, grpc.WithUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			start := time.Now()
			err := invoker(ctx, method, req, reply, cc, opts...)
			observe(OperationName(method), time.Since(start), err)
			return err
		}))
	}
	conn, err := grpc.NewClient(endpoint, dial...)
	if err != nil {
		return nil, fmt.Errorf("container runtime endpoint %q: %w", endpoint, err)
	}
	return &Client{
		endpoint:    endpoint,
		conn:        conn,
		runtime:     runtimeapi.NewRuntimeServiceClient(conn),
		images:      runtimeapi.NewImageServiceClient(conn),
		timeout:     opts.Timeout,
		pullTimeout: opts.PullTimeout,
	}, nil
}

// Endpoint is the runtime's address.
func (c *Client) Endpoint() string { return c.endpoint }

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }

func (c *Client) call(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.timeout)
}

// Version asks the runtime for its name and versions.
func (c *Client) Version(ctx context.Context) (*runtimeapi.VersionResponse, error) {
	ctx, cancel := c.call(ctx)
	defer cancel()
	resp, err := c.runtime.Version(ctx, &runtimeapi.VersionRequest{})
	return resp, c.classify("Version", err)
}

// Status returns the runtime's conditions (RuntimeReady, NetworkReady) and,
// when verbose, its configuration as JSON strings in Info.
func (c *Client) Status(ctx context.Context, verbose bool) (*runtimeapi.StatusResponse, error) {
	ctx, cancel := c.call(ctx)
	defer cancel()
	resp, err := c.runtime.Status(ctx, &runtimeapi.StatusRequest{Verbose: verbose})
	return resp, c.classify("Status", err)
}

// UpdatePodCIDR tells the runtime the node's pod CIDRs (comma-separated),
// as the kubelet does when the Node's spec.podCIDRs change; containerd
// fills its CNI configuration template with them.
func (c *Client) UpdatePodCIDR(ctx context.Context, cidrs string) error {
	ctx, cancel := c.call(ctx)
	defer cancel()
	_, err := c.runtime.UpdateRuntimeConfig(ctx, &runtimeapi.UpdateRuntimeConfigRequest{
		RuntimeConfig: &runtimeapi.RuntimeConfig{NetworkConfig: &runtimeapi.NetworkConfig{PodCidr: cidrs}}})
	return c.classify("UpdateRuntimeConfig", err)
}

// CgroupDriver asks the runtime which cgroup driver it places containers
// with (RuntimeConfig, which the kubelet asks since 1.34): "systemd" or
// "cgroupfs". A runtime without the call answers Unimplemented.
func (c *Client) CgroupDriver(ctx context.Context) (string, error) {
	ctx, cancel := c.call(ctx)
	defer cancel()
	resp, err := c.runtime.RuntimeConfig(ctx, &runtimeapi.RuntimeConfigRequest{})
	if err != nil {
		return "", c.classify("RuntimeConfig", err)
	}
	return driverName(resp.GetLinux())
}

// driverName names the cgroup driver of a RuntimeConfig answer; no Linux
// part is "" (nothing said).
func driverName(linux *runtimeapi.LinuxRuntimeConfiguration) (string, error) {
	if linux == nil {
		return "", nil
	}
	switch linux.CgroupDriver {
	case runtimeapi.CgroupDriver_SYSTEMD:
		return "systemd", nil
	case runtimeapi.CgroupDriver_CGROUPFS:
		return "cgroupfs", nil
	}
	return "", fmt.Errorf("runtime returned an unknown cgroup driver %d", linux.CgroupDriver)
}

// Condition finds a named runtime condition in a Status answer.
func Condition(st *runtimeapi.RuntimeStatus, name string) *runtimeapi.RuntimeCondition {
	if st == nil {
		return nil
	}
	for _, cond := range st.Conditions {
		if cond.Type == name {
			return cond
		}
	}
	return nil
}

// OperationName turns a CRI method ("/runtime.v1.RuntimeService/RunPodSandbox")
// into the kubelet's operation_type label ("run_podsandbox").
func OperationName(method string) string {
	name := method[strings.LastIndexByte(method, '/')+1:]
	name = strings.ReplaceAll(name, "PodSandbox", "Podsandbox")
	var b strings.Builder
	for i, r := range name {
		if unicode.IsUpper(r) {
			if i > 0 {
				b.WriteByte('_')
			}
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}
