package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
)

type client struct {
	server      string
	manifestDir string
	out         io.Writer
	midLine     bool // a log line longer than one record is being printed
}

var httpClient = &http.Client{Timeout: 10 * time.Second}

func (c *client) fetch(path string, into any) error {
	resp, err := httpClient.Get(c.server + path)
	if err != nil {
		return fmt.Errorf("cannot reach nodeagent at %s: is it running? (%v)", c.server, errors.Unwrap(err))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s%s: %s: %s", c.server, path, resp.Status, strings.TrimSpace(string(body)))
	}
	return json.Unmarshal(body, into)
}

func (c *client) pods() ([]corev1.Pod, error) {
	var list corev1.PodList
	if err := c.fetch("/pods", &list); err != nil {
		return nil, err
	}
	return list.Items, nil
}

// findPod matches the listed name, or the manifest name plus the node suffix.
func (c *client) findPod(name string) (*corev1.Pod, error) {
	pods, err := c.pods()
	if err != nil {
		return nil, err
	}
	ns, bare, ok := strings.Cut(name, "/")
	if !ok {
		ns, bare = "", name
	}
	for i := range pods {
		p := &pods[i]
		if ns != "" && p.Namespace != ns {
			continue
		}
		if p.Name == bare || p.Name == bare+"-"+strings.ToLower(p.Spec.NodeName) {
			return p, nil
		}
	}
	return nil, fmt.Errorf("pod %q not found", name)
}

func (c *client) config() (*kubeletv1beta1.KubeletConfiguration, error) {
	var cz struct {
		KubeletConfig kubeletv1beta1.KubeletConfiguration `json:"kubeletconfig"`
	}
	if err := c.fetch("/configz", &cz); err != nil {
		return nil, err
	}
	return &cz.KubeletConfig, nil
}

// manifests is the static pod directory: --manifest-dir, else the agent's.
func (c *client) manifests() (string, error) {
	if c.manifestDir != "" {
		return c.manifestDir, nil
	}
	cfg, err := c.config()
	if err != nil {
		return "", fmt.Errorf("%w (or pass --manifest-dir)", err)
	}
	if cfg.StaticPodPath == "" {
		return "", errors.New("the agent reports no staticPodPath; pass --manifest-dir")
	}
	return cfg.StaticPodPath, nil
}

func (c *client) events() ([]corev1.Event, error) {
	var list corev1.EventList
	if err := c.fetch("/events", &list); err != nil {
		return nil, err
	}
	return list.Items, nil
}
