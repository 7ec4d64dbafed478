package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"nodeagent/internal/control"
)

// MaxResponse bounds what the client reads of one answer.
const MaxResponse = 64 << 20

// Client talks to one agent: its read-only API (Server, an http:// URL)
// and, for what acts on the node, its root-only control socket. What the
// read-only API says is for display: a local user can answer on that
// port when the agent is down, so nothing derived from it steers root.
type Client struct {
	Server        string
	ControlSocket string
	http          *http.Client
}

// NewClient returns a client of the agent at server, acting through
// controlSocket ("": read-only).
func NewClient(server, controlSocket string) *Client {
	return &Client{Server: strings.TrimRight(server, "/"), ControlSocket: controlSocket, http: &http.Client{Timeout: 10 * time.Second}}
}

// Get reads path from the read-only API into into (nil: the answer is
// only checked). A status other than 200 is an error with the body's
// first line; an agent that does not answer is ErrUnreachable.
func (c *Client) Get(ctx context.Context, path string, into any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.Server+path, nil)
	if err != nil {
		return err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("%w at %s: is it running? (%v)", ErrUnreachable, c.Server, errors.Unwrap(err))
	}
	return Decode(resp, c.Server+path, into)
}

// ErrUnreachable is an agent that does not answer.
var ErrUnreachable = errors.New("cannot reach nodeagent")

// Decode reads one answer, bounded, into into; a status other than 200
// is an error naming what with the body's first line.
func Decode(resp *http.Response, what string, into any) error {
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponse+1))
	if err != nil {
		return err
	}
	if len(body) > MaxResponse {
		return fmt.Errorf("%s: answer over %d MiB", what, MaxResponse>>20)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s: %s", what, resp.Status, firstLine(body))
	}
	if into == nil {
		return nil
	}
	return json.Unmarshal(body, into)
}

func firstLine(b []byte) string {
	s, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
	if len(s) > 512 {
		s = s[:512]
	}
	return s
}

// Healthz is nil when every check of /healthz passes.
func (c *Client) Healthz(ctx context.Context) error { return c.Get(ctx, "/healthz", nil) }

// Pods lists the pods with their status (/pods).
func (c *Client) Pods(ctx context.Context) ([]corev1.Pod, error) {
	var list corev1.PodList
	err := c.Get(ctx, "/pods", &list)
	return list.Items, err
}

// Node is the node object with its conditions (/node).
func (c *Client) Node(ctx context.Context) (*corev1.Node, error) {
	var n corev1.Node
	if err := c.Get(ctx, "/node", &n); err != nil {
		return nil, err
	}
	return &n, nil
}

// Events lists the agent's events (/events).
func (c *Client) Events(ctx context.Context) ([]corev1.Event, error) {
	var list corev1.EventList
	err := c.Get(ctx, "/events", &list)
	return list.Items, err
}

// Evictions lists the recorded eviction decisions (/evictions).
func (c *Client) Evictions(ctx context.Context) ([]EvictionTrace, error) {
	var out []EvictionTrace
	err := c.Get(ctx, "/evictions", &out)
	return out, err
}

// Cgroups lists the QoS tree (/cgroups).
func (c *Client) Cgroups(ctx context.Context) ([]CgroupEntry, error) {
	var out []CgroupEntry
	err := c.Get(ctx, "/cgroups", &out)
	return out, err
}

// Probes lists a pod's probes.
func (c *Client) Probes(ctx context.Context, namespace, name string) ([]ProbeReport, error) {
	var out []ProbeReport
	err := c.Get(ctx, "/pods/"+url.PathEscape(namespace)+"/"+url.PathEscape(name)+"/probes", &out)
	return out, err
}

// ManifestResult is what applying a manifest did (POST /manifests on the
// control socket).
type ManifestResult struct {
	Name   string `json:"name"`   // metadata.name as written
	File   string `json:"file"`   // where it was written
	Result string `json:"result"` // created, configured or unchanged
}

// control is an HTTP client of the control socket: it talks only to a
// server running as root.
func (c *Client) control(timeout time.Duration) *http.Client {
	return control.Client(c.ControlSocket, 0, timeout)
}

// controlError explains a control socket that cannot be used.
func (c *Client) controlError(err error) error {
	if errors.Is(err, control.ErrUntrustedPeer) {
		return fmt.Errorf("refusing the control socket: %w", err)
	}
	return fmt.Errorf("the agent's control socket %s: %w (run as root on the node, or name another socket)", c.ControlSocket, errors.Unwrap(err))
}

// TrustedConfig reads the configuration in effect over the control
// socket into into ({"kubeletconfig": ..., "nodeagent": ...}): the only
// source a client may derive host paths from.
func (c *Client) TrustedConfig(ctx context.Context, into any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://agent/configz", nil)
	if err != nil {
		return err
	}
	resp, err := c.control(10 * time.Second).Do(req)
	if err != nil {
		return c.controlError(err)
	}
	return Decode(resp, "control socket /configz", into)
}

// TrustedPods lists the pods the agent runs, asked over the control
// socket: the only list a client may take the pod and container it acts
// on (exec, logs, delete) from.
func (c *Client) TrustedPods(ctx context.Context) ([]corev1.Pod, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://agent/pods", nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.control(30 * time.Second).Do(req)
	if err != nil {
		return nil, c.controlError(err)
	}
	var list corev1.PodList
	if err := Decode(resp, "control socket /pods", &list); err != nil {
		return nil, err
	}
	return list.Items, nil
}

// Apply has the agent validate a Pod manifest and write it into its
// manifest directory.
func (c *Client) Apply(ctx context.Context, manifest []byte) (ManifestResult, error) {
	var res ManifestResult
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://agent/manifests", bytes.NewReader(manifest))
	if err != nil {
		return res, err
	}
	req.Header.Set("Content-Type", "application/yaml")
	resp, err := c.control(30 * time.Second).Do(req)
	if err != nil {
		return res, c.controlError(err)
	}
	err = Decode(resp, "apply", &res)
	return res, err
}

// Delete has the agent remove a pod's manifest and stop the pod, with
// grace seconds instead of its own when set.
func (c *Client) Delete(ctx context.Context, namespace, name string, grace *int64) error {
	u := "http://agent/pods/" + url.PathEscape(namespace) + "/" + url.PathEscape(name)
	if grace != nil {
		u += fmt.Sprintf("?gracePeriodSeconds=%d", *grace)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, u, nil)
	if err != nil {
		return err
	}
	resp, err := c.control(30 * time.Second).Do(req)
	if err != nil {
		return c.controlError(err)
	}
	return Decode(resp, "delete "+namespace+"/"+name, nil)
}

// CPUs is the CPU manager's state.
func (c *Client) CPUs(ctx context.Context) (CPUManager, error) {
	var out CPUManager
	err := c.Get(ctx, "/cpus", &out)
	return out, err
}
