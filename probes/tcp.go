package probes

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
)

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
