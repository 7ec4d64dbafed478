package probes

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	corev1 "k8s.io/api/core/v1"

	"nodeagent/internal/version"
)

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
