package source

import (
	"context"
	"log/slog"
	"maps"
	"sort"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"nodeagent/manifest"
)

// SourceAPI names the API server's pods in updates and annotations.
const SourceAPI = "api"

// FromAPI reports whether pod came from the API server; the others are
// static pods.
func FromAPI(pod *corev1.Pod) bool {
	return pod.Annotations[manifest.AnnotationConfigSource] == SourceAPI
}

// AnnotationMirror marks a mirror pod: the API's copy of a static pod,
// which the agent writes and never runs.
const AnnotationMirror = "kubernetes.io/config.mirror"

// API lists and watches the pods bound to the node (spec.nodeName), as the
// kubelet's API source does. The reflector re-lists after a dropped watch,
// a 410 Gone or an API-server restart, and each change sends the whole set
// again: the pod manager converges on it without restarting what runs.
type API struct {
	client func(context.Context) (kubernetes.Interface, error)
	node   string
	log    *slog.Logger

	mu     sync.Mutex
	store  cache.Store             // nil until Run has a client
	copies map[types.UID]copiedPod // the last copy handed out per pod
	synced func() bool             // the first list arrived
	dirty  chan struct{}           // a change since the last update
}

type copiedPod struct {
	resourceVersion string
	pod             *corev1.Pod
}

// NewAPI returns the API source; client waits for the connection.
func NewAPI(client func(context.Context) (kubernetes.Interface, error), node string, log *slog.Logger) *API {
	return &API{client: client, node: node, log: log, copies: map[types.UID]copiedPod{}, dirty: make(chan struct{}, 1)}
}

// Name is "api".
func (s *API) Name() string { return SourceAPI }

// Run watches the node's pods and sends the desired set on every change,
// once the first list has arrived.
func (s *API) Run(ctx context.Context, out chan<- Update) {
	client, err := s.client(ctx)
	if err != nil {
		return
	}
	lw := cache.NewListWatchFromClient(client.CoreV1().RESTClient(), "pods", metav1.NamespaceAll,
		fields.OneTermEqualSelector("spec.nodeName", s.node))
	informer := cache.NewSharedIndexInformer(lw, &corev1.Pod{}, 0, cache.Indexers{})
	mark := func(any) {
		select {
		case s.dirty <- struct{}{}:
		default:
		}
	}
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: mark, UpdateFunc: func(_, n any) { mark(n) }, DeleteFunc: mark,
	}); err != nil {
		s.log.Error("API pod source: cannot watch", "err", err)
		return
	}
	s.mu.Lock()
	s.store, s.synced = informer.GetStore(), informer.HasSynced
	s.mu.Unlock()
	go informer.RunWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		return
	}
	s.log.Info("API pod source synced", "node", s.node)
	for {
		u := Update{Source: SourceAPI, Pods: s.desired()}
		select {
		case out <- u:
		case <-ctx.Done():
			return
		}
		select {
		case <-s.dirty:
		case <-ctx.Done():
			return
		}
	}
}

// desired is the node's pods less mirror pods, each marked with its
// source and stripped of the annotations only the agent may set. A pod's copy is made again only when it changed.
func (s *API) desired() []*corev1.Pod {
	s.mu.Lock()
	defer s.mu.Unlock()
	var pods []*corev1.Pod
	live := map[types.UID]bool{}
	for _, obj := range s.store.List() {
		p := obj.(*corev1.Pod)
		if isMirror(p) {
			continue
		}
		live[p.UID] = true
		c, ok := s.copies[p.UID]
		if !ok || c.resourceVersion != p.ResourceVersion {
			cp := p.DeepCopy()
			if cp.Annotations == nil {
				cp.Annotations = map[string]string{}
			}
			maps.DeleteFunc(cp.Annotations, func(k, _ string) bool { return manifest.AgentOwned(k) })
			cp.Annotations[manifest.AnnotationConfigSource] = SourceAPI
			c = copiedPod{resourceVersion: p.ResourceVersion, pod: cp}
			s.copies[p.UID] = c
		}
		pods = append(pods, c.pod)
	}
	for uid := range s.copies {
		if !live[uid] {
			delete(s.copies, uid)
		}
	}
	sort.Slice(pods, func(i, j int) bool {
		if !pods[i].CreationTimestamp.Equal(&pods[j].CreationTimestamp) {
			return pods[i].CreationTimestamp.Before(&pods[j].CreationTimestamp)
		}
		return pods[i].UID < pods[j].UID
	})
	return pods
}

// Pod is the API's pod namespace/name as last seen (mirror pods
// included), or false. The returned pod is shared: do not modify it.
func (s *API) Pod(namespace, name string) (*corev1.Pod, bool) {
	s.mu.Lock()
	store := s.store
	s.mu.Unlock()
	if store == nil {
		return nil, false
	}
	obj, ok, err := store.GetByKey(namespace + "/" + name)
	if err != nil || !ok {
		return nil, false
	}
	return obj.(*corev1.Pod), true
}

// Synced reports whether the first list has arrived.
func (s *API) Synced() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.synced != nil && s.synced()
}

// Mirrors lists the mirror pods the API shows on the node. The pods are
// shared: do not modify them.
func (s *API) Mirrors() []*corev1.Pod {
	s.mu.Lock()
	store := s.store
	s.mu.Unlock()
	if store == nil {
		return nil
	}
	var out []*corev1.Pod
	for _, obj := range store.List() {
		if p := obj.(*corev1.Pod); isMirror(p) {
			out = append(out, p)
		}
	}
	return out
}

func isMirror(p *corev1.Pod) bool {
	_, ok := p.Annotations[AnnotationMirror]
	return ok
}
