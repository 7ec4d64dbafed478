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

	"nodeagent/internal/control"
)

// Two channels, two levels of trust. The read-only API (--server) is
// what any local user can answer when the agent is down: nodectl shows
// what it says and nothing more. Whatever nodectl does as root on the
// node (write or remove a manifest, read a log file, reach the runtime)
// comes from the control socket, whose server must run as root, or from
// flags the operator gave.
type client struct {
	server        string
	controlSocket string
	manifestDir   string
	out           io.Writer
	midLine       bool // a log line longer than one record is being printed
}

var httpClient = &http.Client{Timeout: 10 * time.Second}

// maxResponse bounds what nodectl reads of one answer of the agent.
const maxResponse = 64 << 20

func (c *client) fetch(path string, into any) error {
	resp, err := httpClient.Get(c.server + path)
	if err != nil {
		return fmt.Errorf("cannot reach nodeagent at %s: is it running? (%v)", c.server, errors.Unwrap(err))
	}
	return decode(resp, c.server+path, into)
}

// decode reads one answer, bounded, into into; a status other than 200
// is an error with the body's first line.
func decode(resp *http.Response, what string, into any) error {
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse+1))
	if err != nil {
		return err
	}
	if len(body) > maxResponse {
		return fmt.Errorf("%s: answer over %d MiB", what, maxResponse>>20)
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

// control is an HTTP client of the agent's control socket: it talks only
// to a server running as root.
func (c *client) control(timeout time.Duration) *http.Client {
	return control.Client(c.controlSocket, 0, timeout)
}

// controlError explains a control socket that cannot be used.
func (c *client) controlError(err error) error {
	if errors.Is(err, control.ErrUntrustedPeer) {
		return fmt.Errorf("refusing the control socket: %w", err)
	}
	return fmt.Errorf("the agent's control socket %s: %w (nodectl must run as root on the node; --control-socket names another socket)", c.controlSocket, errors.Unwrap(err))
}

// trustedConfig is the configuration the agent runs with, asked over the
// control socket: the only source nodectl derives host paths from.
func (c *client) trustedConfig() (*kubeletv1beta1.KubeletConfiguration, error) {
	resp, err := c.control(10 * time.Second).Get("http://agent/configz")
	if err != nil {
		return nil, c.controlError(err)
	}
	var cz struct {
		KubeletConfig kubeletv1beta1.KubeletConfiguration `json:"kubeletconfig"`
	}
	if err := decode(resp, "control socket /configz", &cz); err != nil {
		return nil, err
	}
	return &cz.KubeletConfig, nil
}

func (c *client) events() ([]corev1.Event, error) {
	var list corev1.EventList
	if err := c.fetch("/events", &list); err != nil {
		return nil, err
	}
	return list.Items, nil
}

// controlSocketDefault is --control-socket's default.
func controlSocketDefault() string { return envOr("NODEAGENT_CONTROL_SOCKET", control.DefaultSocket) }
