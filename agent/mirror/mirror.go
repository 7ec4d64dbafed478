// Package mirror keeps a mirror pod in the API server for each static pod.
package mirror

import (
	"context"
	"log/slog"
	"maps"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"nodeagent/agent/source"
	"nodeagent/manifest"
)

// APIPods is what the API server last showed of the node's pods (the API
// source's cache), mirror pods among them.
type APIPods interface {
	Pod(namespace, name string) (*corev1.Pod, bool)
	Mirrors() []*corev1.Pod
}

// Manager keeps one mirror pod in the API for each static pod, as the
// kubelet does: the static pod's name, namespace, labels and spec, the
// kubernetes.io/config.mirror annotation (the static pod's hash) and the
// Node as controlling owner. A mirror that is deleted is made again, one
// whose hash differs is replaced, and one whose static pod went is
// deleted.
type Manager struct {
	client func(context.Context) (kubernetes.Interface, error)
	api    APIPods
	node   func() *corev1.Node // the registered Node, for the owner reference
	clock  clock.WithTicker
	log    *slog.Logger
	kick   chan struct{}

	// terminating reports a pod of that name still stopping on the node:
	// an edited static pod's old mirror stays until the old pod is gone.
	terminating func(namespace, name string) bool

	mu     sync.Mutex
	static []*corev1.Pod
	known  bool // the file source has spoken
}

// NewManager returns a Manager; SetStatic feeds it the static pods.
func NewManager(client func(context.Context) (kubernetes.Interface, error), api APIPods, node func() *corev1.Node,
	terminating func(namespace, name string) bool, clk clock.WithTicker, log *slog.Logger) *Manager {
	return &Manager{client: client, api: api, node: node, terminating: terminating, clock: clk, log: log, kick: make(chan struct{}, 1)}
}

// SetStatic records the static pods (the file source's latest set).
func (m *Manager) SetStatic(pods []*corev1.Pod) {
	m.mu.Lock()
	m.static, m.known = pods, true
	m.mu.Unlock()
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

// MirrorPeriod is how often the mirrors are checked without a change.
const MirrorPeriod = 10 * time.Second

// Run keeps the mirrors until ctx ends.
func (m *Manager) Run(ctx context.Context) {
	client, err := m.client(ctx)
	if err != nil {
		return
	}
	tick := m.clock.NewTicker(MirrorPeriod)
	defer tick.Stop()
	for {
		m.sync(ctx, client)
		select {
		case <-ctx.Done():
			return
		case <-m.kick:
		case <-tick.C():
		}
	}
}

func (m *Manager) sync(ctx context.Context, client kubernetes.Interface) {
	m.mu.Lock()
	static, known := m.static, m.known
	m.mu.Unlock()
	node := m.node()
	if !known || node == nil {
		return
	}
	wanted := map[string]bool{}
	for _, sp := range static {
		wanted[sp.Namespace+"/"+sp.Name] = true
		m.ensure(ctx, client, node, sp)
	}
	for _, mp := range m.api.Mirrors() {
		// A removed static pod's mirror stays while the pod stops.
		if !wanted[mp.Namespace+"/"+mp.Name] && (m.terminating == nil || !m.terminating(mp.Namespace, mp.Name)) {
			m.remove(ctx, client, mp, "its static pod is gone")
		}
	}
}

// ensure makes the static pod's mirror exist with its current hash.
func (m *Manager) ensure(ctx context.Context, client kubernetes.Interface, node *corev1.Node, sp *corev1.Pod) {
	hash := sp.Annotations[manifest.AnnotationConfigHash]
	if cur, ok := m.api.Pod(sp.Namespace, sp.Name); ok {
		h, mirror := cur.Annotations[source.AnnotationMirror]
		switch {
		case !mirror:
			m.log.Warn("a pod of the static pod's name exists in the API and is not its mirror; no mirror pod", "pod", sp.Namespace+"/"+sp.Name)
			return
		case cur.DeletionTimestamp != nil:
			// Deleted gracefully by someone: nothing on the node stops for
			// it, so the agent finishes the deletion and makes it again,
			// as the kubelet does.
			if !m.remove(ctx, client, cur, "it was deleted") {
				return
			}
		case h == hash:
			return
		case m.terminating != nil && m.terminating(sp.Namespace, sp.Name):
			return // the old pod is stopping with its grace period: its mirror stays
		default:
			m.remove(ctx, client, cur, "its static pod changed")
			return
		}
	}
	mirror := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: sp.Name, Namespace: sp.Namespace, Labels: maps.Clone(sp.Labels), Annotations: maps.Clone(sp.Annotations),
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID, Controller: ptr.To(true)}},
		},
		Spec: *sp.Spec.DeepCopy(),
	}
	// The manifest's host path stays on the node.
	maps.DeleteFunc(mirror.Annotations, func(k, _ string) bool { return strings.HasPrefix(k, manifest.AgentPrefix) })
	mirror.Annotations[source.AnnotationMirror] = hash
	mirror.Spec.NodeName = node.Name
	if _, err := client.CoreV1().Pods(sp.Namespace).Create(ctx, mirror, metav1.CreateOptions{}); err != nil {
		if !apierrors.IsAlreadyExists(err) { // else made by the last pass, not yet in the cache
			m.log.Warn("cannot create the mirror pod", "pod", sp.Namespace+"/"+sp.Name, "err", err)
		}
		return
	}
	m.log.Info("created the mirror pod", "pod", sp.Namespace+"/"+sp.Name)
}

// remove deletes a mirror pod (grace 0, that UID only); false when it
// may still be there.
func (m *Manager) remove(ctx context.Context, client kubernetes.Interface, mp *corev1.Pod, why string) bool {
	err := client.CoreV1().Pods(mp.Namespace).Delete(ctx, mp.Name, metav1.DeleteOptions{
		GracePeriodSeconds: ptr.To[int64](0), Preconditions: &metav1.Preconditions{UID: &mp.UID},
	})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		m.log.Warn("cannot delete the mirror pod", "pod", mp.Namespace+"/"+mp.Name, "err", err)
		return false
	}
	m.log.Info("deleted the mirror pod: "+why, "pod", mp.Namespace+"/"+mp.Name)
	return true
}
