package cri

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// notFoundRuntime answers every object lookup with NotFound, like a runtime
// asked about something already removed.
type notFoundRuntime struct {
	runtimeapi.UnimplementedRuntimeServiceServer
}

func (notFoundRuntime) StopContainer(context.Context, *runtimeapi.StopContainerRequest) (*runtimeapi.StopContainerResponse, error) {
	return nil, status.Error(codes.NotFound, `container "x" not found`)
}
func (notFoundRuntime) RemovePodSandbox(context.Context, *runtimeapi.RemovePodSandboxRequest) (*runtimeapi.RemovePodSandboxResponse, error) {
	return nil, status.Error(codes.NotFound, `sandbox "x" not found`)
}
func (notFoundRuntime) ContainerStatus(context.Context, *runtimeapi.ContainerStatusRequest) (*runtimeapi.ContainerStatusResponse, error) {
	return nil, status.Error(codes.NotFound, `container "x" not found`)
}
func (notFoundRuntime) StartContainer(context.Context, *runtimeapi.StartContainerRequest) (*runtimeapi.StartContainerResponse, error) {
	return nil, status.Error(codes.Unknown, "failed to start: exec: not found")
}

// ExecSync times out the way containerd 1.6 says it: code Unknown.
func (notFoundRuntime) ExecSync(context.Context, *runtimeapi.ExecSyncRequest) (*runtimeapi.ExecSyncResponse, error) {
	return nil, status.Error(codes.Unknown, `failed to exec in container: timeout 1s exceeded: context deadline exceeded`)
}

// stopRecorder answers StopContainer at once and records what it was asked.
type stopRecorder struct {
	runtimeapi.UnimplementedRuntimeServiceServer
	timeout  chan int64
	deadline chan time.Time
}

func (r stopRecorder) StopContainer(ctx context.Context, req *runtimeapi.StopContainerRequest) (*runtimeapi.StopContainerResponse, error) {
	d, _ := ctx.Deadline()
	r.timeout <- req.Timeout
	r.deadline <- d
	return &runtimeapi.StopContainerResponse{}, nil
}

// A huge terminationGracePeriodSeconds (the API server sets no bound) used
// to wrap the call's deadline into the past: the stop failed at once and
// was retried in a loop instead of waiting.
func TestHugeGraceWaitsInsteadOfWrapping(t *testing.T) {
	rec := stopRecorder{timeout: make(chan int64, 1), deadline: make(chan time.Time, 1)}
	c, err := New(serveWith(t, rec), Options{Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	before := time.Now()
	if err := c.StopContainer(context.Background(), "x", 1e10); err != nil {
		t.Fatalf("StopContainer with grace 1e10: %v", err)
	}
	if got := <-rec.timeout; got <= 0 || got > int64(1<<63-1)/int64(time.Second) {
		t.Errorf("timeout sent to the runtime = %d s: must be positive and fit a Duration", got)
	}
	// gRPC carries the deadline as a timeout; it caps what it can send,
	// but the runtime must see one far in the future, not a past one.
	if d := <-rec.deadline; !d.IsZero() && d.Before(before.Add(24*time.Hour)) {
		t.Errorf("deadline %v: want a deadline far in the future (or none)", d)
	}
}

func serve(t *testing.T) string {
	return serveWith(t, notFoundRuntime{})
}

func serveWith(t *testing.T, rt runtimeapi.RuntimeServiceServer) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "cri.sock")
	lis, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	runtimeapi.RegisterRuntimeServiceServer(srv, rt)
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	return "unix://" + sock
}

func TestErrorsAreClassified(t *testing.T) {
	c, err := New(serve(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	if err := c.StopContainer(ctx, "x", 0); err != nil {
		t.Errorf("StopContainer of a missing container must succeed, got %v", err)
	}
	if err := c.RemovePodSandbox(ctx, "x"); err != nil {
		t.Errorf("RemovePodSandbox of a missing sandbox must succeed, got %v", err)
	}
	if _, err := c.ContainerStatus(ctx, "x"); !IsNotFound(err) {
		t.Errorf("ContainerStatus: want ErrNotFound, got %v", err)
	}
	err = c.StartContainer(ctx, "x")
	var crierr *Error
	if !errors.As(err, &crierr) || crierr.Op != "StartContainer" || IsNotFound(err) {
		t.Errorf("StartContainer: want a classified non-NotFound Error, got %#v", err)
	}
}

func TestExecTimeoutIsADeadline(t *testing.T) {
	c, err := New(serve(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.ExecSync(context.Background(), "x", []string{"sleep", "10"}, time.Second); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("the runtime's exec timeout: want a deadline error, got %v", err)
	}
	// Without a timeout asked for, an Unknown answer stays what it is.
	if _, err := c.ExecSync(context.Background(), "x", []string{"true"}, 0); errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("no timeout asked, yet a deadline error: %v", err)
	}
}

func TestUnreachableRuntime(t *testing.T) {
	endpoint := "unix://" + filepath.Join(t.TempDir(), "missing.sock")
	c, err := New(endpoint, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.Version(context.Background())
	if !errors.Is(err, ErrUnreachable) {
		t.Fatalf("want ErrUnreachable, got %v", err)
	}
	if want := "container runtime not reachable at " + endpoint + ": is containerd running?"; err.Error() != want {
		t.Errorf("message = %q, want %q", err.Error(), want)
	}
}

func TestBadEndpoint(t *testing.T) {
	for _, ep := range []string{"", "/run/containerd.sock", "tcp://127.0.0.1:1", "unix://"} {
		if _, err := New(ep, Options{}); err == nil {
			t.Errorf("New(%q) must fail", ep)
		}
	}
}

func TestOperationNameIsTheKubelets(t *testing.T) {
	for method, want := range map[string]string{
		"/runtime.v1.RuntimeService/RunPodSandbox":      "run_podsandbox",
		"/runtime.v1.RuntimeService/PodSandboxStatus":   "podsandbox_status",
		"/runtime.v1.RuntimeService/ListPodSandbox":     "list_podsandbox",
		"/runtime.v1.RuntimeService/ListContainers":     "list_containers",
		"/runtime.v1.RuntimeService/ExecSync":           "exec_sync",
		"/runtime.v1.RuntimeService/ReopenContainerLog": "reopen_container_log",
		"/runtime.v1.ImageService/ImageFsInfo":          "image_fs_info",
		"/runtime.v1.RuntimeService/Version":            "version",
	} {
		if got := OperationName(method); got != want {
			t.Errorf("%s: %q, want %q", method, got, want)
		}
	}
}
