package probes

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"nodeagent/internal/sat"
	"nodeagent/internal/version"
)

// RunHook runs a postStart or preStop handler to completion or until ctx
// ends, with the kubelet's semantics: exec has no timeout of its own and
// fails on a non-zero exit; httpGet fails only when the request cannot be
// made (any status code is accepted); sleep fails if cut short.
func (h *Handlers) RunHook(ctx context.Context, lh *corev1.LifecycleHandler, t Target) error {
	switch {
	case lh.Exec != nil:
		cmd := expandCommand(lh.Exec.Command, t.Container)
		resp, err := h.exec.ExecSync(ctx, t.ContainerID, cmd, 0)
		if err != nil {
			return fmt.Errorf("exec %q: %w", strings.Join(cmd, " "), err)
		}
		if resp.ExitCode != 0 {
			return fmt.Errorf("command %q exited with %d, message: %q", strings.Join(cmd, " "), resp.ExitCode, strings.TrimSpace(string(execOutput(resp))))
		}
		return nil
	case lh.HTTPGet != nil:
		req, err := httpRequest(ctx, lh.HTTPGet, t, "kube-lifecycle/"+version.Kubernetes)
		if err != nil {
			return err
		}
		resp, err := (&http.Client{Transport: h.transport}).Do(req)
		if err != nil {
			return err
		}
		io.Copy(io.Discard, io.LimitReader(resp.Body, maxOutput))
		resp.Body.Close()
		return nil
	case lh.Sleep != nil:
		timer := time.NewTimer(sat.Seconds(lh.Sleep.Seconds))
		defer timer.Stop()
		select {
		case <-timer.C:
			return nil
		case <-ctx.Done():
			return errors.New("container terminated before sleep hook finished")
		}
	case lh.TCPSocket != nil:
		return errors.New("tcpSocket is not supported as a lifecycle handler")
	}
	return errors.New("lifecycle handler has no action")
}
