package cluster

import (
	"fmt"
	"net/http"
	"os"
	"strconv"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"nodeagent/internal/version"
)

// MaxKubeconfigSize bounds the kubeconfig read; one with embedded
// certificates is a few KiB.
const MaxKubeconfigSize = 1 << 20

// Connection is how the agent reaches the API server.
type Connection struct {
	Kubeconfig string
	QPS        float32
	Burst      int
	// EventQPS and EventBurst limit the events' own client (a negative
	// QPS: no limit), as the kubelet's eventRecordQPS and eventBurst do:
	// a burst of pod starts sends three events per pod, which must not
	// queue the requests a pod start waits for (its TokenRequests).
	EventQPS   float32
	EventBurst int
	Node       string
	// Observe, if set, is told of every request: its method, the API
	// server's host and its status code ("<error>" when none came).
	Observe func(method, host, code string)
}

// Client loads the kubeconfig and returns a clientset; the error names the
// file and what is wrong with it. It does not contact the server.
func (c Connection) Client() (kubernetes.Interface, *rest.Config, error) {
	info, err := os.Stat(c.Kubeconfig)
	if err != nil {
		return nil, nil, fmt.Errorf("kubeconfig %s: %w", c.Kubeconfig, err)
	}
	if info.Size() > MaxKubeconfigSize {
		return nil, nil, fmt.Errorf("kubeconfig %s: %d bytes, more than the %d a kubeconfig can be", c.Kubeconfig, info.Size(), MaxKubeconfigSize)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil {
		return nil, nil, fmt.Errorf("kubeconfig %s: %w", c.Kubeconfig, err)
	}
	cfg.QPS, cfg.Burst = c.QPS, c.Burst
	cfg.UserAgent = fmt.Sprintf("nodeagent/%s (node %s)", version.Version, c.Node)
	// The kubelet talks protobuf: a third of JSON's CPU for pod lists.
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	if c.Observe != nil {
		cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return observed{rt, c.Observe} })
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("kubeconfig %s: %w", c.Kubeconfig, err)
	}
	return client, cfg, nil
}

// EventClient is a clientset for events, with their own rate limit, over
// the configuration Client returned.
func (c Connection) EventClient(cfg *rest.Config) (kubernetes.Interface, error) {
	return c.derived(cfg, func(ev *rest.Config) { ev.QPS, ev.Burst = c.EventQPS, c.EventBurst })
}

// HeartbeatClient is a clientset for the lease and the node status, as
// the kubelet's heartbeat client: no client-side rate limit, so nothing
// else the node asks (pod status, tokens, reviews of its callers) queues
// a heartbeat, and every request bounded by timeout.
func (c Connection) HeartbeatClient(cfg *rest.Config, timeout time.Duration) (kubernetes.Interface, error) {
	return c.derived(cfg, func(hb *rest.Config) { hb.QPS, hb.Timeout = -1, timeout })
}

// ReviewClient is a clientset for the reviews the kubelet server asks
// (TokenReview, SubjectAccessReview): the main client's rate, a limiter
// of its own, so that callers of :10250, authenticated or not, cannot
// starve the node's own requests, nor the other review's.
func (c Connection) ReviewClient(cfg *rest.Config) (kubernetes.Interface, error) {
	return c.derived(cfg, func(*rest.Config) {})
}

// derived is a clientset over a copy of cfg changed by set: the same
// server and credentials, a rate limiter of its own.
func (c Connection) derived(cfg *rest.Config, set func(*rest.Config)) (kubernetes.Interface, error) {
	d := rest.CopyConfig(cfg)
	set(d)
	client, err := kubernetes.NewForConfig(d)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", c.Kubeconfig, err)
	}
	return client, nil
}

// observed counts requests as they are answered.
type observed struct {
	next    http.RoundTripper
	observe func(method, host, code string)
}

func (o observed) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := o.next.RoundTrip(req)
	code := "<error>"
	if err == nil {
		code = strconv.Itoa(resp.StatusCode)
	}
	o.observe(req.Method, req.URL.Host, code)
	return resp, err
}
