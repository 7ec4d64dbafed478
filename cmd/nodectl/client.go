package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	corev1 "k8s.io/api/core/v1"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"

	"nodeagent/api"
)

// Two channels, two levels of trust. The read-only API (--server) is
// what any local user can answer when the agent is down: nodectl shows
// what it says and nothing more. Whatever nodectl does as root on the
// node (write or remove a manifest, read a log file, reach the runtime)
// comes from the control socket, whose server must run as root, or from
// flags the operator gave.
type client struct {
	agent       *api.Client
	manifestDir string
	out         io.Writer
	errOut      io.Writer // notices (the container picked by default)
}

// fetch reads path from the read-only API, for display.
func (c *client) fetch(path string, into any) error {
	return c.agent.Get(context.Background(), path, into)
}

func (c *client) pods() ([]corev1.Pod, error) { return c.agent.Pods(context.Background()) }

// trustedPod is findPod against the control socket's list: the pod, and
// the containers, nodectl acts on as root (exec, logs, delete). A local
// user answering on the read-only port cannot choose them.
func (c *client) trustedPod(name string) (*corev1.Pod, error) {
	pods, err := c.agent.TrustedPods(context.Background())
	if err != nil {
		return nil, err
	}
	return findIn(pods, name)
}

// findPod matches the listed name, or the manifest name plus the node
// suffix, optionally as NAMESPACE/NAME, in what the read-only API lists:
// for display only.
func (c *client) findPod(name string) (*corev1.Pod, error) {
	pods, err := c.pods()
	if err != nil {
		return nil, err
	}
	return findIn(pods, name)
}

// findIn is the one pod name names. A name that several pods answer to
// (the same name in two namespaces, or one pod's name and another's
// manifest name) is refused with the choices: a pod author must not be
// able to put their pod where the operator meant another.
func findIn(pods []corev1.Pod, name string) (*corev1.Pod, error) {
	var found []*corev1.Pod
	for i := range pods {
		if podMatches(&pods[i], name) {
			found = append(found, &pods[i])
		}
	}
	switch len(found) {
	case 0:
		return nil, fmt.Errorf("pods %q not found", name)
	case 1:
		return found[0], nil
	}
	var names []string
	for _, p := range found {
		names = append(names, p.Namespace+"/"+p.Name)
	}
	return nil, fmt.Errorf("pod name %q matches %d pods (%s): name one as NAMESPACE/NAME", name, len(found), strings.Join(names, ", "))
}

// podMatches: name is the pod's, or its manifest's (the pod's without the
// node suffix), either with a "NAMESPACE/" in front.
func podMatches(p *corev1.Pod, name string) bool {
	ns, bare, ok := strings.Cut(name, "/")
	if !ok {
		ns, bare = "", name
	}
	if ns != "" && p.Namespace != ns {
		return false
	}
	return p.Name == bare || p.Name == bare+"-"+strings.ToLower(p.Spec.NodeName)
}

// trustedConfig is the configuration the agent runs with, asked over the
// control socket: the only source nodectl derives host paths from.
func (c *client) trustedConfig() (*kubeletv1beta1.KubeletConfiguration, error) {
	var cz struct {
		KubeletConfig kubeletv1beta1.KubeletConfiguration `json:"kubeletconfig"`
	}
	if err := c.agent.TrustedConfig(context.Background(), &cz); err != nil {
		return nil, err
	}
	return &cz.KubeletConfig, nil
}

func (c *client) events() ([]corev1.Event, error) { return c.agent.Events(context.Background()) }
