package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"nodeagent/agent/source"
	"nodeagent/internal/safefile"
)

// apply validates a Pod manifest as the agent will, then writes it into the
// manifest directory as <name>.yaml (atomically: a dotfile, which the agent
// skips, renamed into place).
func (c *client) apply(file string) error {
	data, err := safefile.Read(file, source.MaxManifestSize)
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	pod, warnings, err := source.ParseManifest(data, file, "node")
	for _, w := range warnings {
		fmt.Fprintf(os.Stderr, "nodectl: warning: %s: %s\n", file, w)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	dir, err := c.manifests()
	if err != nil {
		return err
	}
	name := pod.Name[:len(pod.Name)-len("-node")] // the manifest's own name
	target := filepath.Join(dir, name+".yaml")
	verb := "created"
	if old, err := os.ReadFile(target); err == nil {
		if bytes.Equal(old, data) {
			fmt.Fprintf(c.out, "pod/%s unchanged\n", name)
			return nil
		}
		verb = "configured"
	}
	tmp := filepath.Join(dir, "."+name+".yaml.tmp")
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp, target); err != nil {
		os.Remove(tmp)
		return err
	}
	fmt.Fprintf(c.out, "pod/%s %s (%s)\n", name, verb, target)
	return nil
}

// deletePod removes the manifest of a pod: the file the agent reports for
// it, else <dir>/<name>.yaml. With a grace period it asks the agent, over
// its control socket, to remove the manifest and stop the pod with that
// grace. With wait, it returns once the agent no longer lists the pod.
func (c *client) deletePod(name string, wait bool, grace *int64) error {
	if grace != nil {
		return c.deleteWithGrace(name, *grace, wait)
	}
	target := ""
	pod, err := c.findPod(name)
	switch {
	case err == nil:
		target = pod.Annotations[source.AnnotationManifest]
	case c.manifestDir == "":
		return err
	}
	if target == "" {
		dir, err := c.manifests()
		if err != nil {
			return err
		}
		target = filepath.Join(dir, name+".yaml")
	}
	if err := os.Remove(target); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("pod %q: manifest %s not found", name, target)
		}
		return err
	}
	fmt.Fprintf(c.out, "pod %q deleted (removed %s)\n", name, target)
	if !wait || pod == nil {
		return nil
	}
	return c.waitGone(pod.Name)
}

func (c *client) waitGone(podName string) error {
	for deadline := time.Now().Add(5 * time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if _, err := c.findPod(podName); err != nil {
			return nil
		}
	}
	return fmt.Errorf("pod %q still listed after 5 minutes", podName)
}

func (c *client) deleteWithGrace(name string, grace int64, wait bool) error {
	if grace < 0 {
		return usageError("--grace-period must be >= 0")
	}
	pod, err := c.findPod(name)
	if err != nil {
		return err
	}
	var cz struct {
		NodeAgent struct {
			ControlSocket string `json:"controlSocket"`
		} `json:"nodeagent"`
	}
	if err := c.fetch("/configz", &cz); err != nil {
		return err
	}
	socket := cz.NodeAgent.ControlSocket
	if socket == "" {
		return errors.New("the agent has no control socket (--control-socket is empty): delete without --grace-period")
	}
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", socket)
		},
	}}
	req, _ := http.NewRequest(http.MethodDelete, fmt.Sprintf("http://agent/pods/%s/%s?gracePeriodSeconds=%d", url.PathEscape(pod.Namespace), url.PathEscape(pod.Name), grace), nil)
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("agent control socket %s: %w (nodectl must run as root)", socket, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("delete %s: %s", pod.Name, strings.TrimSpace(string(body)))
	}
	fmt.Fprintf(c.out, "pod %q deleted (grace period %ds)\n", name, grace)
	if wait {
		return c.waitGone(pod.Name)
	}
	return nil
}
