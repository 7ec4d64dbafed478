package experiment

import (
	"context"
	"fmt"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"nodeagent/e2e/launch"
)

// apiAgent is nodeagent joined to the control plane: the run's pods are
// the API server's, bound to its node, so steps can resize them.
type apiAgent struct {
	*agent
	client kubernetes.Interface
}

func startAPIAgent(ctx context.Context, env Env, cp *launch.ControlPlane, dir, settings string, args ...string) (*apiAgent, error) {
	a, err := startAgent(ctx, env, dir, settings, cp, args...)
	if err != nil {
		return nil, err
	}
	cfg := rest.CopyConfig(cp.Config)
	cfg.QPS, cfg.Burst = 100, 200
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		a.stop()
		return nil, err
	}
	p := &apiAgent{agent: a, client: client}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
		if node, err := client.CoreV1().Nodes().Get(ctx, a.nodeName, metav1.GetOptions{}); err == nil && nodeReady(node) {
			return p, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			p.stop()
			return nil, fmt.Errorf("nodeagent's node %s was not Ready in the API within a minute", a.nodeName)
		}
	}
}

// apply creates the pod in the API, bound to the agent's node.
func (p *apiAgent) apply(pod *corev1.Pod) error {
	pod = pod.DeepCopy()
	pod.Namespace, pod.Spec.NodeName = apiNamespace, p.nodeName
	_, err := p.client.CoreV1().Pods(apiNamespace).Create(context.Background(), pod, metav1.CreateOptions{})
	return err
}

func (p *apiAgent) resize(ctx context.Context, pod string, r *Resize) error {
	return resizeAPIPod(ctx, p.client, pod, r)
}

// removePods deletes the pods in the API and waits until the agent has
// let every one go.
func (p *apiAgent) removePods(timeout time.Duration) error {
	return removeAPIPods(p.client, p.nodeName, p.manifests, timeout, p.pods)
}

// removeAPIPods deletes the node's pods in the API and its static pods'
// manifests, and waits until list is empty.
func removeAPIPods(client kubernetes.Interface, nodeName, manifests string, timeout time.Duration, list func() ([]corev1.Pod, error)) error {
	err := client.CoreV1().Pods(apiNamespace).DeleteCollection(context.Background(), metav1.DeleteOptions{},
		metav1.ListOptions{FieldSelector: "spec.nodeName=" + nodeName})
	if err != nil {
		return err
	}
	return removeManifests(manifests, timeout, list)
}

// stop ends the agent and removes its Node.
func (p *apiAgent) stop() {
	p.agent.stop()
	if err := p.client.CoreV1().Nodes().Delete(context.Background(), p.nodeName, metav1.DeleteOptions{}); err != nil {
		fmt.Fprintln(os.Stderr, "experiment: remove nodeagent's Node:", err)
	}
}
