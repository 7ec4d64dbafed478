package experiment

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"nodeagent/cri"
	"nodeagent/e2e/launch"
)

// kubeletPeer is the real kubelet joined to a control plane: pods bound
// to it through the API, since a standalone kubelet never evicts (its
// static pods count as critical).
type kubeletPeer struct {
	k        *launch.Kubelet
	client   kubernetes.Interface
	nodeName string
}

// apiNamespace holds the experiment's pods in the API.
const apiNamespace = "default"

func startKubelet(ctx context.Context, env Env, cp *launch.ControlPlane, dir, settings string) (*kubeletPeer, error) {
	if cp == nil {
		return nil, errors.New("the kubelet peer needs a control plane (Env.ControlplaneBin)")
	}
	b := make([]byte, 4)
	rand.Read(b)
	name := "experiment-kubelet-" + hex.EncodeToString(b)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	kubeconfig := filepath.Join(dir, "node.kubeconfig")
	if err := cp.NodeKubeconfig(name, kubeconfig); err != nil {
		return nil, err
	}
	k, err := launch.NewKubelet(launch.KubeletOptions{Bin: env.KubeletBin, RuntimeBin: env.RuntimeBin, Dir: dir, NodeName: name,
		Registry: env.Registry, PauseImage: env.PauseImage, Kubeconfig: kubeconfig, Config: settings})
	if err != nil {
		return nil, err
	}
	cfg := rest.CopyConfig(cp.Config)
	cfg.QPS, cfg.Burst = 100, 200
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	p := &kubeletPeer{k: k, client: client, nodeName: name}
	if err := k.Start(ctx, time.Minute); err != nil {
		p.stop()
		return nil, err
	}
	// The image in its own runtime first, as nodeagent's runtime has it.
	rt, err := cri.New(k.Runtime.Endpoint(), cri.Options{Timeout: time.Minute})
	if err == nil {
		_, err = rt.PullImage(ctx, env.Image, nil, nil)
		rt.Close()
	}
	if err != nil {
		p.stop()
		return nil, fmt.Errorf("pulling %s into the kubelet's runtime: %w", env.Image, err)
	}
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		if node, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{}); err == nil && nodeReady(node) {
			return p, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			p.stop()
			return nil, fmt.Errorf("the kubelet's node %s was not Ready within 2 minutes (log %s)", name, k.LogPath())
		}
	}
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func (p *kubeletPeer) node() string           { return p.nodeName }
func (p *kubeletPeer) podsCgroupRoot() string { return p.k.CgroupRoot }
func (p *kubeletPeer) pid() int               { return p.k.Pid() }

// apply creates the pod in the API, bound to the kubelet's node.
func (p *kubeletPeer) apply(pod *corev1.Pod) error {
	pod = pod.DeepCopy()
	pod.Namespace, pod.Spec.NodeName = apiNamespace, p.nodeName
	_, err := p.client.CoreV1().Pods(apiNamespace).Create(context.Background(), pod, metav1.CreateOptions{})
	return err
}

func (p *kubeletPeer) pods() ([]corev1.Pod, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	list, err := p.client.CoreV1().Pods(apiNamespace).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + p.nodeName})
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}

// resize resizes the pod in place through the API.
func (p *kubeletPeer) resize(ctx context.Context, pod string, r *Resize) error {
	return resizeAPIPod(ctx, p.client, pod, r)
}

// collect has nothing of the kubelet's own: its evictions and the
// kernel's kills are read from the pods' statuses and the samples.
func (p *kubeletPeer) collect(*Run) error { return nil }

// removePods deletes the pods in the API and waits until the kubelet has
// confirmed every deletion.
func (p *kubeletPeer) removePods(timeout time.Duration) error {
	return removeAPIPods(p.client, p.nodeName, p.k.Manifests, timeout, p.pods)
}

// stop ends the kubelet and its runtime (the host as it was), removes its
// Node and the runtime's images; its logs stay in the run's directory.
func (p *kubeletPeer) stop() {
	if err := p.k.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "experiment: after the kubelet:", err)
	}
	p.client.CoreV1().Nodes().Delete(context.Background(), p.nodeName, metav1.DeleteOptions{})
	os.RemoveAll(filepath.Join(p.k.Runtime.Dir, "containerd2"))
}
