package conformance

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"nodeagent/api"
	"nodeagent/internal/crilog"
	"nodeagent/internal/layout"
)

// Node is the live agent under test, as its public interfaces show it.
type Node struct {
	API        string // the read-only API, http://host:port
	Name       string
	Manifests  string // staticPodPath
	PodLogsDir string
	Kubepods   string // the kubepods cgroup directory (memory hierarchy on v1)
	CgroupV2   bool
	PerQOS     bool
	Image      string // the image cases run (busybox, memhog)
	// RuntimeEndpoint is the agent's runtime; AgentBin is the agent binary
	// the eviction cases start beside it with their own settings.
	RuntimeEndpoint string
	AgentBin        string
	agent           *api.Client
}

// Connect reads the agent's /node from its API, and its configuration
// (where manifests and logs are: the suite writes and reads there as
// root) from its control socket, whose server must be root.
func Connect(ctx context.Context, server, controlSocket, image string) (*Node, error) {
	n := &Node{API: strings.TrimRight(server, "/"), Image: image, agent: api.NewClient(server, controlSocket)}
	var configz struct {
		Kubelet struct {
			StaticPodPath            string `json:"staticPodPath"`
			ContainerRuntimeEndpoint string `json:"containerRuntimeEndpoint"`
			PodLogsDir               string `json:"podLogsDir"`
			CgroupsPerQOS            *bool  `json:"cgroupsPerQOS"`
		} `json:"kubeletconfig"`
	}
	if err := n.agent.TrustedConfig(ctx, &configz); err != nil {
		return nil, fmt.Errorf("the agent's configuration over its control socket %s: %w", controlSocket, err)
	}
	var node corev1.Node
	if err := n.get(ctx, "/node", &node); err != nil {
		return nil, err
	}
	n.Name, n.Manifests, n.PodLogsDir = node.Name, configz.Kubelet.StaticPodPath, configz.Kubelet.PodLogsDir
	n.RuntimeEndpoint = configz.Kubelet.ContainerRuntimeEndpoint
	n.PerQOS = configz.Kubelet.CgroupsPerQOS == nil || *configz.Kubelet.CgroupsPerQOS
	n.Kubepods = node.Annotations[api.AnnotationCgroupRoot]
	n.CgroupV2 = node.Annotations[api.AnnotationCgroupVersion] == "v2"
	if n.Manifests == "" {
		return nil, errors.New("the agent's /configz has no staticPodPath")
	}
	if fi, err := os.Stat(n.Manifests); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("the agent's manifest directory %s is not reachable from here (run on the node, as a user who may write it): %v", n.Manifests, err)
	}
	return n, nil
}

func (n *Node) get(ctx context.Context, path string, into any) error {
	return n.agent.Get(ctx, path, into)
}

// T is a running case's handle: it creates the case's pods and removes
// them again.
type T struct {
	ctx      context.Context
	node     *Node
	name     string
	suffix   string
	files    []string // manifests written
	podNames []string // as listed, to wait for their removal
	cleanups []func(context.Context) error
}

func newT(ctx context.Context, node *Node, name string) *T {
	b := make([]byte, 3)
	rand.Read(b)
	return &T{ctx: ctx, node: node, name: name, suffix: hex.EncodeToString(b)}
}

// Node is the node under test.
func (t *T) Node() *Node { return t.node }

// Context is done when the run is interrupted.
func (t *T) Context() context.Context { return t.ctx }

// Defer runs f after the case, even when it failed or was interrupted.
func (t *T) Defer(f func(context.Context) error) { t.cleanups = append(t.cleanups, f) }

// Create writes pod as a static manifest, its name made unique for this
// run, and returns the name the agent lists it under.
func (t *T) Create(pod *corev1.Pod) (string, error) {
	pod = pod.DeepCopy()
	pod.APIVersion, pod.Kind = "v1", "Pod"
	pod.Name = pod.Name + "-" + t.suffix
	if pod.Spec.TerminationGracePeriodSeconds == nil {
		grace := int64(2)
		pod.Spec.TerminationGracePeriodSeconds = &grace
	}
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			if list[i].Image == "" {
				list[i].Image = t.node.Image
			}
		}
	}
	data, err := yaml.Marshal(pod)
	if err != nil {
		return "", err
	}
	file := filepath.Join(t.node.Manifests, "conformance-"+pod.Name+".yaml")
	tmp := filepath.Join(t.node.Manifests, ".conformance-"+pod.Name+".tmp")
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, file); err != nil {
		os.Remove(tmp)
		return "", err
	}
	listed := pod.Name + "-" + t.node.Name
	t.files = append(t.files, file)
	t.podNames = append(t.podNames, listed)
	return listed, nil
}

// Delete removes a pod's manifest and waits until the agent has let the
// pod go.
func (t *T) Delete(listed string) error {
	for i, name := range t.podNames {
		if name == listed {
			if err := os.Remove(t.files[i]); err != nil && !os.IsNotExist(err) {
				return err
			}
		}
	}
	return t.WaitGone(t.ctx, listed, 60*time.Second)
}

// goneFor is how long a removed pod must stay unlisted to count as gone:
// a manifest written just before it was removed may not have been listed
// yet when the first poll looks.
const goneFor = 2 * time.Second

// WaitGone waits until the pod is no longer listed, and stays so.
func (t *T) WaitGone(ctx context.Context, listed string, timeout time.Duration) error {
	var since time.Time
	return poll(ctx, timeout, "pod "+listed+" to be removed", func() error {
		p, err := t.pod(ctx, listed)
		if err != nil {
			return err
		}
		if p != nil {
			since = time.Time{}
			return fmt.Errorf("still listed (%s)", p.Status.Phase)
		}
		if since.IsZero() {
			since = time.Now()
		}
		if time.Since(since) < goneFor {
			return errors.New("not listed; making sure it stays so")
		}
		return nil
	})
}

// Pod is the pod as the agent lists it; nil when not listed.
func (t *T) Pod(listed string) (*corev1.Pod, error) { return t.pod(t.ctx, listed) }

func (t *T) pod(ctx context.Context, listed string) (*corev1.Pod, error) {
	var list corev1.PodList
	if err := t.node.get(ctx, "/pods", &list); err != nil {
		return nil, err
	}
	for i := range list.Items {
		if list.Items[i].Name == listed {
			return &list.Items[i], nil
		}
	}
	return nil, nil
}

// WaitPod polls the pod until check returns nil; the last check's error is
// the reason on timeout. check gets nil while the pod is not listed.
func (t *T) WaitPod(listed string, timeout time.Duration, what string, check func(*corev1.Pod) error) (*corev1.Pod, error) {
	var last *corev1.Pod
	err := poll(t.ctx, timeout, what, func() error {
		p, err := t.Pod(listed)
		if err != nil {
			return err
		}
		last = p
		if p == nil {
			return check(nil)
		}
		return check(p)
	})
	return last, err
}

// Logs is a container's log (its current instance's file), as text.
func (t *T) Logs(p *corev1.Pod, container string) (string, error) {
	dir := layout.Logs(t.node.PodLogsDir).Container(p.Namespace, p.Name, p.UID, container)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", fmt.Errorf("container %s logs: %w", container, err)
	}
	var out strings.Builder
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".log") {
			continue
		}
		f, err := os.Open(filepath.Join(dir, e.Name()))
		if err != nil {
			return "", err
		}
		r := crilog.NewReader(f)
		for {
			rec, err := r.Next()
			if err != nil {
				break
			}
			out.Write(rec.Content)
			out.WriteByte('\n')
		}
		f.Close()
	}
	return out.String(), nil
}

// cleanup removes the case's manifests and waits for its pods to go, with
// a context of its own: an interrupted run still cleans up.
func (t *T) cleanup() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var errs []error
	for i := len(t.cleanups) - 1; i >= 0; i-- {
		errs = append(errs, t.cleanups[i](ctx))
	}
	for _, f := range t.files {
		if err := os.Remove(f); err != nil && !os.IsNotExist(err) {
			errs = append(errs, err)
		}
	}
	for _, name := range t.podNames {
		errs = append(errs, t.WaitGone(ctx, name, 90*time.Second))
	}
	return errors.Join(errs...)
}

// poll calls f every 250 ms until it returns nil, ctx is done or timeout
// passes; the error names what was awaited and f's last error.
func poll(ctx context.Context, timeout time.Duration, what string, f func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %s waiting for %s: %w", timeout, what, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("interrupted waiting for %s: %w", what, ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}
