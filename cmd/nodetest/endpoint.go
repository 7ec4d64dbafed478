package main

import (
	"context"
	"fmt"
	"os"
	"time"

	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"

	"nodeagent/api"
	"nodeagent/cri"
)

// defaultRuntimeEndpoint is the kubelet's default.
const defaultRuntimeEndpoint = "unix:///run/containerd/containerd.sock"

// runtimeEndpoint is the runtime the running agent uses, asked over its
// control socket (a root-only channel: the read-only port's answer must not
// steer what root talks to), or the kubelet's default when no agent runs.
func (t *tester) runtimeEndpoint() string {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	var cz struct {
		KubeletConfig kubeletv1beta1.KubeletConfiguration `json:"kubeletconfig"`
	}
	if err := api.NewClient(t.server, t.controlSocket).TrustedConfig(ctx, &cz); err != nil || cz.KubeletConfig.ContainerRuntimeEndpoint == "" {
		return defaultRuntimeEndpoint
	}
	fmt.Fprintf(os.Stderr, "runtime endpoint %s (the running agent's)\n", cz.KubeletConfig.ContainerRuntimeEndpoint)
	return cz.KubeletConfig.ContainerRuntimeEndpoint
}

// checkRuntime fails fast when nothing answers at endpoint, rather than
// in every run.
func checkRuntime(endpoint string) error {
	c, err := cri.New(endpoint, cri.Options{Timeout: 10 * time.Second})
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := c.Version(context.Background()); err != nil {
		return fmt.Errorf("%w (set --runtime-endpoint or CRI_ENDPOINT)", err)
	}
	return nil
}
