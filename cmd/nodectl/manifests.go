package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"nodeagent/agent/source"
)

// apply validates a Pod manifest as the agent will, then writes it into the
// manifest directory as <name>.yaml (atomically: a dotfile, which the agent
// skips, renamed into place).
func (c *client) apply(file string) error {
	data, err := os.ReadFile(file)
	if err != nil {
		return err
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
// it, else <dir>/<name>.yaml. With wait, it returns once the agent no
// longer lists the pod.
func (c *client) deletePod(name string, wait bool) error {
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
	for deadline := time.Now().Add(5 * time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if _, err := c.findPod(pod.Name); err != nil {
			return nil
		}
	}
	return fmt.Errorf("pod %q still listed after 5 minutes", name)
}
