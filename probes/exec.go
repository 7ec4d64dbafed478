package probes

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"nodeagent/internal/expand"
)

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
		msg := fmt.Sprintf("command %q exited with %d: ", strings.Join(cmd, " "), resp.ExitCode)
		return outcome{result: Failure, message: msg, output: strings.TrimSpace(string(out))}
	}
	return outcome{result: Success, output: string(out)}
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
