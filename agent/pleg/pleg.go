// Package pleg keeps the agent's view of what the runtime holds for each pod
// (the pod lifecycle event generator): a relist of the agent's sandboxes and
// containers every period, diffed against the previous one; full statuses
// are fetched only for objects whose state changed, and the pods they belong
// to are announced to a callback (the pod workers wake on it). Workers can
// also ask for a fresh per-pod inspection right after acting (Inspect).
//
// The cache is safe for concurrent use. Status messages it hands out are
// shared and must not be modified.
package pleg

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sort"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"nodeagent/cri"
)

// Runtime is the part of the CRI client the relister needs.
type Runtime interface {
	ListPodSandbox(ctx context.Context, filter *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error)
	ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error)
	PodSandboxStatus(ctx context.Context, id string) (*runtimeapi.PodSandboxStatus, error)
	ContainerStatus(ctx context.Context, id string) (*runtimeapi.ContainerStatus, error)
}

// PodRuntime is what the runtime holds for one pod.
type PodRuntime struct {
	UID        types.UID
	Sandboxes  []*runtimeapi.PodSandboxStatus // newest first
	Containers []*runtimeapi.ContainerStatus  // newest first
	ObservedAt time.Time                      // when the lists behind it were taken
}

// LatestSandbox is the newest sandbox, or nil.
func (p *PodRuntime) LatestSandbox() *runtimeapi.PodSandboxStatus {
	if p == nil || len(p.Sandboxes) == 0 {
		return nil
	}
	return p.Sandboxes[0]
}

// GetSandboxes is Sandboxes, safe on a nil record.
func (p *PodRuntime) GetSandboxes() []*runtimeapi.PodSandboxStatus {
	if p == nil {
		return nil
	}
	return p.Sandboxes
}

// GetContainers is Containers, safe on a nil record.
func (p *PodRuntime) GetContainers() []*runtimeapi.ContainerStatus {
	if p == nil {
		return nil
	}
	return p.Containers
}

// ContainersNamed returns the records of one container name, newest first.
func (p *PodRuntime) ContainersNamed(name string) []*runtimeapi.ContainerStatus {
	if p == nil {
		return nil
	}
	var out []*runtimeapi.ContainerStatus
	for _, c := range p.Containers {
		if c.GetMetadata().GetName() == name {
			out = append(out, c)
		}
	}
	return out
}

// Cache relists the runtime and keeps per-pod records.
type Cache struct {
	rt   Runtime
	opts Options

	kick     chan struct{} // a runtime event asks for a relist now
	relistMu sync.Mutex    // one relist at a time

	mu         sync.Mutex
	pods       map[types.UID]*PodRuntime
	sandboxes  map[string]*runtimeapi.PodSandboxStatus
	containers map[string]*runtimeapi.ContainerStatus
	lastRelist time.Time
}

// Options configure a Cache.
type Options struct {
	Node  string // only objects labelled for this node are cached
	Clock clock.WithTicker
	Log   *slog.Logger
	// Notify, if set, is called outside any lock with every pod whose
	// runtime state changed.
	Notify func(types.UID)
	// RelistObserved, if set, is told how long each periodic or
	// event-driven relist took.
	RelistObserved func(time.Duration)
	// RelistInterval, if set, is told the time between the starts of two
	// relists (the kubelet's kubelet_pleg_relist_interval_seconds).
	RelistInterval func(time.Duration)
}

// New returns a cache of rt's objects labelled for opts.Node.
func New(rt Runtime, opts Options) *Cache {
	return &Cache{
		rt: rt, opts: opts, kick: make(chan struct{}, 1),
		pods:       map[types.UID]*PodRuntime{},
		sandboxes:  map[string]*runtimeapi.PodSandboxStatus{},
		containers: map[string]*runtimeapi.ContainerStatus{},
	}
}

// RelistPeriod is how often Run relists, as the kubelet's generic PLEG.
const RelistPeriod = time.Second

// Run relists every RelistPeriod, and at once when WatchEvents reports a
// runtime event, until ctx is done.
func (c *Cache) Run(ctx context.Context) {
	t := c.opts.Clock.NewTicker(RelistPeriod)
	defer t.Stop()
	failing := ""
	var last time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		case <-c.kick:
		}
		start := c.opts.Clock.Now()
		if c.opts.RelistInterval != nil && !last.IsZero() {
			c.opts.RelistInterval(start.Sub(last))
		}
		last = start
		err := c.Relist(ctx)
		if c.opts.RelistObserved != nil && err == nil {
			c.opts.RelistObserved(c.opts.Clock.Since(start))
		}
		switch {
		case ctx.Err() != nil:
		case err != nil && err.Error() != failing:
			failing = err.Error()
			c.opts.Log.Warn("relist failed; retrying every second", "err", err)
		case err == nil && failing != "":
			failing = ""
			c.opts.Log.Info("relist recovered")
		}
	}
}

// EventStream yields runtime events (cri.ContainerEventStream).
type EventStream interface {
	Recv() (*runtimeapi.ContainerEventResponse, error)
}

// maxStreamRetries is how often the event stream may fail before the cache
// falls back to relisting alone, as the kubelet's evented PLEG does.
const maxStreamRetries = 5

// WatchEvents turns the runtime's container events into immediate relists,
// so changes are seen at once rather than at the next tick. Runtimes
// without an event stream (containerd 1.6) leave the periodic relist alone
// in charge.
func (c *Cache) WatchEvents(ctx context.Context, open func(context.Context) (EventStream, error), unimplemented func(error) bool) {
	for failures := 0; failures < maxStreamRetries && ctx.Err() == nil; failures++ {
		s, err := open(ctx)
		for err == nil {
			if _, err = s.Recv(); err == nil {
				failures = 0
				select {
				case c.kick <- struct{}{}:
				default:
				}
			}
		}
		if ctx.Err() != nil {
			return
		}
		if unimplemented(err) {
			c.opts.Log.Info("the runtime does not stream container events; relisting every second", "period", RelistPeriod)
			return
		}
		c.opts.Log.Warn("container event stream failed; relisting meanwhile", "err", err)
		timer := c.opts.Clock.NewTimer(time.Second)
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-timer.C():
		}
	}
	if ctx.Err() == nil {
		c.opts.Log.Warn("container event stream keeps failing; relisting only", "period", RelistPeriod)
	}
}

// Relist lists the node's sandboxes and containers once, refreshes the
// statuses of those whose state changed, and announces the changed pods.
func (c *Cache) Relist(ctx context.Context) error {
	c.relistMu.Lock()
	defer c.relistMu.Unlock()
	at := c.opts.Clock.Now()
	managed := map[string]string{cri.LabelManagedBy: c.opts.Node}
	sbs, err := c.rt.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: managed})
	if err != nil {
		return err
	}
	cs, err := c.rt.ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: managed})
	if err != nil {
		return err
	}

	c.mu.Lock()
	oldSandboxes, oldContainers := c.sandboxes, c.containers
	c.mu.Unlock()

	changed := map[types.UID]bool{}
	sandboxes := make(map[string]*runtimeapi.PodSandboxStatus, len(sbs))
	for _, sb := range sbs {
		st := oldSandboxes[sb.Id]
		if st == nil || st.State != sb.State {
			if st, err = c.rt.PodSandboxStatus(ctx, sb.Id); err != nil {
				if errors.Is(err, cri.ErrNotFound) {
					continue
				}
				return err
			}
			changed[uidOf(sb.Labels)] = true
		}
		sandboxes[sb.Id] = st
	}
	containers := make(map[string]*runtimeapi.ContainerStatus, len(cs))
	refreshed := map[string]bool{}
	for _, ctr := range cs {
		st := oldContainers[ctr.Id]
		if st == nil || st.State != ctr.State {
			if st, err = c.rt.ContainerStatus(ctx, ctr.Id); err != nil {
				if errors.Is(err, cri.ErrNotFound) {
					continue
				}
				return err
			}
			changed[uidOf(ctr.Labels)] = true
			refreshed[ctr.Id] = true
		}
		containers[ctr.Id] = st
	}
	for id, st := range oldSandboxes {
		if _, ok := sandboxes[id]; !ok {
			changed[uidOf(st.Labels)] = true
		}
	}
	for id, st := range oldContainers {
		if _, ok := containers[id]; !ok {
			changed[uidOf(st.Labels)] = true
		}
	}

	c.mu.Lock()
	// A status an Inspect read since the relist began, in the same state,
	// is fresher than the one carried over: it holds what changes without
	// a state change (resources after an in-place resize).
	for id, st := range containers {
		if cur := c.containers[id]; !refreshed[id] && cur != nil && cur != st && cur.State == st.State {
			containers[id] = cur
		}
	}
	pods := group(sandboxes, containers, at)
	c.sandboxes, c.containers = sandboxes, containers
	for uid, p := range pods {
		if cur, ok := c.pods[uid]; ok && cur.ObservedAt.After(at) {
			continue // a newer Inspect already holds fresher data
		}
		c.pods[uid] = p
	}
	for uid, cur := range c.pods {
		if _, ok := pods[uid]; !ok && !cur.ObservedAt.After(at) {
			delete(c.pods, uid)
		}
	}
	c.lastRelist = at
	c.mu.Unlock()

	for uid := range changed {
		if uid != "" && c.opts.Notify != nil {
			c.opts.Notify(uid)
		}
	}
	return nil
}

// Inspect reads one pod's sandboxes and containers from the runtime now,
// stores and returns them. It does not suppress the relist's events for the
// changes it saw.
func (c *Cache) Inspect(ctx context.Context, uid types.UID) (*PodRuntime, error) {
	at := c.opts.Clock.Now()
	labels := map[string]string{cri.LabelManagedBy: c.opts.Node, cri.LabelPodUID: string(uid)}
	sbs, err := c.rt.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: labels})
	if err != nil {
		return nil, err
	}
	cs, err := c.rt.ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: labels})
	if err != nil {
		return nil, err
	}
	sandboxes := map[string]*runtimeapi.PodSandboxStatus{}
	for _, sb := range sbs {
		st, err := c.rt.PodSandboxStatus(ctx, sb.Id)
		if errors.Is(err, cri.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		sandboxes[sb.Id] = st
	}
	containers := map[string]*runtimeapi.ContainerStatus{}
	for _, ctr := range cs {
		st, err := c.rt.ContainerStatus(ctx, ctr.Id)
		if errors.Is(err, cri.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		containers[ctr.Id] = st
	}
	// The relist's own view keeps its states, so the next relist still
	// sees, and announces, every change; a status in the state the relist
	// knows replaces its copy (copied on write: a relist reads the old map).
	p := group(sandboxes, containers, at)[uid]
	c.mu.Lock()
	defer c.mu.Unlock()
	var view map[string]*runtimeapi.ContainerStatus
	for id, st := range containers {
		if old := c.containers[id]; old != nil && old.State == st.State && !proto.Equal(old.GetResources(), st.GetResources()) {
			if view == nil {
				view = maps.Clone(c.containers)
			}
			view[id] = st
		}
	}
	if view != nil {
		c.containers = view
	}
	cur, ok := c.pods[uid]
	if ok && cur.ObservedAt.After(at) {
		return cur, nil
	}
	if p == nil {
		// Nothing left: forget the pod, so it no longer counts as present.
		delete(c.pods, uid)
		return &PodRuntime{UID: uid, ObservedAt: at}, nil
	}
	c.pods[uid] = p
	return p, nil
}

// Get returns the pod's last known runtime state (nil when the runtime
// holds nothing for it).
func (c *Cache) Get(uid types.UID) *PodRuntime {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pods[uid]
}

// ContainerNames maps the IDs of the pod's containers, as the last relist
// saw them, to their names: how eviction tells a container's cgroup.
func (c *Cache) ContainerNames(uid types.UID) map[string]string {
	names := map[string]string{}
	for _, ctr := range c.Get(uid).GetContainers() {
		names[ctr.Id] = ctr.GetMetadata().GetName()
	}
	return names
}

// UIDs lists every pod the runtime holds objects for.
func (c *Cache) UIDs() []types.UID {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]types.UID, 0, len(c.pods))
	for uid := range c.pods {
		out = append(out, uid)
	}
	return out
}

// Containers lists every container of the last relist.
func (c *Cache) Containers() []*runtimeapi.ContainerStatus {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*runtimeapi.ContainerStatus, 0, len(c.containers))
	for _, st := range c.containers {
		out = append(out, st)
	}
	return out
}

// Running counts the pods with a ready sandbox and the containers by state
// ("running", "exited", ...), as of the last relist.
func (c *Cache) Running() (pods int, containers map[string]int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, sb := range c.sandboxes {
		if sb.State == runtimeapi.PodSandboxState_SANDBOX_READY {
			pods++
		}
	}
	containers = map[string]int{}
	for _, st := range c.containers {
		state := strings.ToLower(strings.TrimPrefix(st.State.String(), "CONTAINER_"))
		containers[state]++
	}
	return pods, containers
}

// RelistThreshold is how long relisting may stall before the agent reports
// itself unhealthy, as the kubelet's PLEG health check.
const RelistThreshold = 3 * time.Minute

// Healthy fails when no relist succeeded within RelistThreshold, with the
// kubelet's wording.
func (c *Cache) Healthy() error {
	last := c.LastRelist()
	if last.IsZero() {
		return errors.New("relist is not healthy: no relist has completed yet")
	}
	if since := c.opts.Clock.Since(last); since > RelistThreshold {
		return fmt.Errorf("relist is not healthy: relist was last seen active %s ago; threshold is %s", since.Round(time.Second), RelistThreshold)
	}
	return nil
}

// LastRelist is the time of the last successful relist (zero if none).
func (c *Cache) LastRelist() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lastRelist
}

func uidOf(labels map[string]string) types.UID { return types.UID(labels[cri.LabelPodUID]) }

func group(sandboxes map[string]*runtimeapi.PodSandboxStatus, containers map[string]*runtimeapi.ContainerStatus, at time.Time) map[types.UID]*PodRuntime {
	pods := map[types.UID]*PodRuntime{}
	get := func(uid types.UID) *PodRuntime {
		p, ok := pods[uid]
		if !ok {
			p = &PodRuntime{UID: uid, ObservedAt: at}
			pods[uid] = p
		}
		return p
	}
	for _, st := range sandboxes {
		p := get(uidOf(st.Labels))
		p.Sandboxes = append(p.Sandboxes, st)
	}
	for _, st := range containers {
		p := get(uidOf(st.Labels))
		p.Containers = append(p.Containers, st)
	}
	for _, p := range pods {
		sort.Slice(p.Sandboxes, func(i, j int) bool { return p.Sandboxes[i].CreatedAt > p.Sandboxes[j].CreatedAt })
		sort.Slice(p.Containers, func(i, j int) bool { return p.Containers[i].CreatedAt > p.Containers[j].CreatedAt })
	}
	return pods
}
