package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"nodeagent/agent/certificates"
	"nodeagent/agent/node"
	"nodeagent/internal/loop"
)

// Options configure the agent's part in a cluster.
type Options struct {
	Connection Connection
	// Bootstrap, if set, gets the connection's client certificate first.
	Bootstrap *certificates.Bootstrap
	Node      node.ObjectOptions
	// LeaseDuration is nodeLeaseDurationSeconds; the lease is renewed
	// every quarter of it, as the kubelet does.
	LeaseDuration time.Duration
	// Build gives the node as the agent sees it (node.Status.Node);
	// Images lists the runtime's images for the node status.
	Build  func(now time.Time) *corev1.Node
	Images func(ctx context.Context) ([]corev1.ContainerImage, error)
	Clock  clock.WithTicker
	Log    *slog.Logger
}

// Cluster connects to the API server, registers the node and keeps it
// alive there (status and lease). Until the first registration succeeds it
// retries with back-off, re-reading the kubeconfig each time; the agent's
// static pods run meanwhile.
type Cluster struct {
	opts Options
	log  *slog.Logger

	connected chan struct{} // closed once client is set and the node registered
	syncNow   chan struct{} // a status change that should not wait for the next tick
	client    kubernetes.Interface
	events    kubernetes.Interface // client with the events' rate limit
	heartbeat kubernetes.Interface // lease and node status, never rate-limited
	// tokenReviews and accessReviews are the kubelet server's, each with
	// a rate limiter of its own.
	tokenReviews, accessReviews kubernetes.Interface
	host                        string                      // the API server's URL, from the kubeconfig
	node                        atomic.Pointer[corev1.Node] // as last registered or patched

	mu      sync.Mutex
	lastErr error // why the last contact failed; nil when it worked
}

// New returns a Cluster; Run connects.
func New(opts Options) *Cluster {
	return &Cluster{opts: opts, log: opts.Log, connected: make(chan struct{}), syncNow: make(chan struct{}, 1), lastErr: errors.New("not connected yet")}
}

// Client waits until the node is registered and returns the clientset;
// it returns ctx's error if ctx ends first.
func (c *Cluster) Client(ctx context.Context) (kubernetes.Interface, error) {
	return c.once(ctx, func() kubernetes.Interface { return c.client })
}

// EventClient is Client for events: the same server and credentials,
// their own rate limit.
func (c *Cluster) EventClient(ctx context.Context) (kubernetes.Interface, error) {
	return c.once(ctx, func() kubernetes.Interface { return c.events })
}

// ReviewClients are the clients of the kubelet server's TokenReviews and
// SubjectAccessReviews, once the node joined: each has a rate limiter of
// its own, which no other request of the node shares.
func (c *Cluster) ReviewClients(ctx context.Context) (tokens, access kubernetes.Interface, err error) {
	select {
	case <-c.connected:
		return c.tokenReviews, c.accessReviews, nil
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
}

// once waits until the node joined (or ctx ends) and returns which.
func (c *Cluster) once(ctx context.Context, which func() kubernetes.Interface) (kubernetes.Interface, error) {
	select {
	case <-c.connected:
		return which(), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Node is the Node object as the API server last returned it; nil before
// the node joined.
func (c *Cluster) Node() *corev1.Node { return c.node.Load() }

// Healthy is nil while the API server answers the node's heartbeats.
func (c *Cluster) Healthy() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lastErr != nil {
		return fmt.Errorf("API server (kubeconfig %s): %w", c.opts.Connection.Kubeconfig, c.lastErr)
	}
	return nil
}

func (c *Cluster) setErr(err error) (changed bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	changed = (err == nil) != (c.lastErr == nil) || err != nil && c.lastErr != nil && err.Error() != c.lastErr.Error()
	c.lastErr = err
	return changed
}

// Run connects, registers, then keeps the node's status and lease until
// ctx ends.
func (c *Cluster) Run(ctx context.Context) {
	nodes, ok := c.connect(ctx)
	if !ok {
		return
	}
	var wg sync.WaitGroup
	wg.Go(func() { c.runLease(ctx) })
	loop.EveryOrWoken(ctx, c.opts.Clock, c.opts.Node.UpdateFrequency, c.syncNow, func(ctx context.Context) {
		err := nodes.Sync(ctx)
		if n := nodes.Registered(); n != nil {
			c.node.Store(n)
		}
		if err != nil && ctx.Err() == nil && c.setErr(err) {
			c.log.Warn("node status not sent; retrying", "err", err, "every", c.opts.Node.UpdateFrequency)
		} else if err == nil && c.setErr(nil) {
			c.log.Info("API server reachable again", "server", c.host)
		}
	})
	wg.Wait()
}

// SyncNow sends the node's status at once (as the kubelet does when the
// node starts shutting down) instead of at the next tick; it does not
// block, and one pending request covers many.
func (c *Cluster) SyncNow() {
	select {
	case c.syncNow <- struct{}{}:
	default:
	}
}

// connect retries until the node is registered: a kubeconfig that does
// not load, a server that does not answer or refuses the credentials are
// logged once each (again when the reason changes) and retried.
func (c *Cluster) connect(ctx context.Context) (*node.APISync, bool) {
	delay := time.Second
	for {
		nodes, err := c.tryConnect(ctx)
		if err == nil {
			c.setErr(nil)
			c.log.Info("joined the cluster", "node", c.opts.Connection.Node, "server", c.host)
			close(c.connected)
			return nodes, true
		}
		if ctx.Err() != nil {
			return nil, false
		}
		if c.setErr(err) {
			c.log.Error("cannot join the cluster; static pods keep running, retrying", "kubeconfig", c.opts.Connection.Kubeconfig, "err", err, "retry_in", delay)
		}
		t := c.opts.Clock.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, false
		case <-t.C():
		}
		delay = min(2*delay, 30*time.Second)
	}
}

func (c *Cluster) tryConnect(ctx context.Context) (*node.APISync, error) {
	if c.opts.Bootstrap != nil {
		if err := c.opts.Bootstrap.Ensure(ctx); err != nil {
			return nil, err
		}
	}
	client, cfg, err := c.opts.Connection.Client()
	if err != nil {
		return nil, err
	}
	events, err := c.opts.Connection.EventClient(cfg)
	if err != nil {
		return nil, err
	}
	heartbeat, err := c.opts.Connection.HeartbeatClient(cfg, c.heartbeatTimeout())
	if err != nil {
		return nil, err
	}
	tokenReviews, err := c.opts.Connection.ReviewClient(cfg)
	if err != nil {
		return nil, err
	}
	accessReviews, err := c.opts.Connection.ReviewClient(cfg)
	if err != nil {
		return nil, err
	}
	nodes := node.NewAPISync(heartbeat, c.opts.Connection.Node, c.opts.Node, c.opts.Build, c.opts.Images, c.opts.Clock, c.log.With("component", "node-status"))
	callCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := nodes.Sync(callCtx); err != nil {
		return nil, explain(err)
	}
	c.client, c.events, c.heartbeat, c.host = client, events, heartbeat, cfg.Host
	c.tokenReviews, c.accessReviews = tokenReviews, accessReviews
	c.node.Store(nodes.Registered())
	return nodes, nil
}

// heartbeatTimeout bounds one heartbeat request as the kubelet does: the
// node status period, or the lease's duration when that is shorter.
func (c *Cluster) heartbeatTimeout() time.Duration {
	t := c.opts.Node.UpdateFrequency
	if t <= 0 || (c.opts.LeaseDuration > 0 && c.opts.LeaseDuration < t) {
		t = c.opts.LeaseDuration
	}
	if t <= 0 {
		t = 10 * time.Second
	}
	return t
}
