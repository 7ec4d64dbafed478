package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"nodeagent/internal/cli"
	"nodeagent/internal/safefile"
	"nodeagent/manifest"
)

// apply validates a Pod manifest as the agent will and puts it in the
// manifest directory as <name>.yaml: through the agent's control socket,
// or, with --manifest-dir, into that directory directly (the agent may be
// down).
func (c *client) apply(file string) error {
	data, err := safefile.Read(file, manifest.MaxManifestSize)
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	pod, warnings, err := manifest.ParseManifest(data, file, "node")
	for _, w := range warnings {
		fmt.Fprintf(os.Stderr, "nodectl: warning: %s: %s\n", file, w)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	if c.manifestDir != "" {
		return c.applyLocal(strings.TrimSuffix(pod.Name, "-node"), data)
	}
	res, err := c.agent.Apply(context.Background(), data)
	if err != nil {
		return fmt.Errorf("apply %s: %w", file, err)
	}
	fmt.Fprintf(c.out, "pod/%s %s (%s)\n", res.Name, res.Result, res.File)
	return nil
}

// applyLocal writes <dir>/<name>.yaml durably; name is a validated pod
// name, so the file stays in the directory the operator named.
func (c *client) applyLocal(name string, data []byte) error {
	target := filepath.Join(c.manifestDir, name+".yaml")
	verb := "created"
	if old, err := safefile.Read(target, manifest.MaxManifestSize); err == nil {
		if bytes.Equal(old, data) {
			fmt.Fprintf(c.out, "pod/%s unchanged\n", name)
			return nil
		}
		verb = "configured"
	}
	if err := safefile.Write(target, data, 0o644); err != nil {
		return err
	}
	fmt.Fprintf(c.out, "pod/%s %s (%s)\n", name, verb, target)
	return nil
}

// deletePod removes a pod's manifest and lets the agent stop the pod
// (with grace seconds, when set, instead of the pod's own). The agent
// does it, over its control socket: it knows which file the pod came
// from. With --manifest-dir, <dir>/<name>.yaml is removed directly (the
// agent may be down). With wait, it returns once the agent no longer
// lists the pod.
func (c *client) deletePod(name string, wait bool, grace *int64) error {
	if grace != nil && *grace < 0 {
		return cli.UsageError("--grace-period must be >= 0")
	}
	if c.manifestDir != "" {
		if grace != nil {
			return cli.UsageError("--grace-period needs the agent (its control socket), not --manifest-dir")
		}
		return c.deleteLocal(name, wait)
	}
	pod, err := c.trustedPod(name)
	if err != nil {
		return err
	}
	if err := c.agent.Delete(context.Background(), pod.Namespace, pod.Name, grace); err != nil {
		return err
	}
	if grace != nil {
		fmt.Fprintf(c.out, "pod %q deleted (grace period %ds)\n", name, *grace)
	} else {
		fmt.Fprintf(c.out, "pod %q deleted\n", name)
	}
	if wait {
		return c.waitGone(pod.Name)
	}
	return nil
}

// deleteLocal removes <dir>/<name>.yaml, name being the manifest's own
// (a suffix of this host's name is dropped when the file is not there).
// Only a valid pod name is turned into a file name. The agent may be down
// and its read-only port anyone's: nothing it lists is used.
func (c *client) deleteLocal(name string, wait bool) error {
	candidates := []string{name}
	// The node suffix is this host's name (the agent's default node name).
	if host, err := os.Hostname(); err == nil {
		if bare, ok := strings.CutSuffix(name, "-"+strings.ToLower(host)); ok && bare != "" {
			candidates = append(candidates, bare)
		}
	}
	for _, n := range candidates {
		if msgs := validation.IsDNS1123Subdomain(n); len(msgs) > 0 {
			return fmt.Errorf("pod name %q: %s", n, msgs[0])
		}
		target := filepath.Join(c.manifestDir, n+".yaml")
		err := os.Remove(target)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(c.out, "pod %q deleted (removed %s)\n", name, target)
		if wait {
			return c.waitGone(n)
		}
		return nil
	}
	return fmt.Errorf("pod %q: no manifest %s in %s", name, name+".yaml", c.manifestDir)
}

func (c *client) waitGone(podName string) error {
	for deadline := time.Now().Add(5 * time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if _, err := c.findPod(podName); err != nil {
			return nil
		}
	}
	return fmt.Errorf("pod %q still listed after 5 minutes", podName)
}
