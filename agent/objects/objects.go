// Package objects serves what the node's pods reference in the API
// server: configMaps, secrets, service account tokens, services and
// runtime classes.
package objects

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
)

// Manager serves what the node's pods reference in the API server, as the
// kubelet's watch-based managers do:
//   - configMaps and secrets: one watch per referenced object (the node
//     authorizer lets a node read only the objects of its own pods, by
//     name), started when the first pod referencing it arrives and stopped
//     when the last leaves; a change wakes the pods that reference it, so
//     their volumes follow within a second, not at the next resync;
//   - service account tokens: TokenRequest bound to the pod, kept until
//     80 % of their lifetime or 24 h, whichever comes first;
//   - services: one informer, for the service link variables;
//   - runtime classes: read when a sandbox is made.
type Manager struct {
	client func(context.Context) (kubernetes.Interface, error)
	wake   func(types.UID)
	clock  clock.Clock
	log    *slog.Logger

	mu       sync.Mutex
	ctx      context.Context      // the watches' lifetime; nil before Run
	cs       kubernetes.Interface // nil before Run has a client
	watches  map[objectKey]*objectWatch
	tokens   map[tokenKey]cachedToken
	services cache.Indexer // by namespace
	synced   func() bool   // the services informer's first list arrived
}

type objectKey struct{ kind, namespace, name string }

type objectWatch struct {
	pods   map[types.UID]bool
	store  cache.Store // nil until started
	synced func() bool
	stop   context.CancelFunc
}

type tokenKey struct {
	pod        types.UID
	account    string
	audience   string
	expiration int64
}

type cachedToken struct {
	token   string
	refresh time.Time
}

// NewManager returns the object cache; wake is told the UIDs of pods whose
// referenced objects changed.
func NewManager(client func(context.Context) (kubernetes.Interface, error), wake func(types.UID), clk clock.Clock, log *slog.Logger) *Manager {
	return &Manager{client: client, wake: wake, clock: clk, log: log, watches: map[objectKey]*objectWatch{}, tokens: map[tokenKey]cachedToken{}}
}

// Run waits for the connection, starts the services informer and the
// watches of pods already tracked, and returns when ctx ends.
func (o *Manager) Run(ctx context.Context) {
	cs, err := o.client(ctx)
	if err != nil {
		return
	}
	informer := cache.NewSharedIndexInformer(cache.NewListWatchFromClient(cs.CoreV1().RESTClient(), "services", metav1.NamespaceAll, fields.Everything()),
		&corev1.Service{}, 0, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	o.mu.Lock()
	o.ctx, o.cs = ctx, cs
	o.services, o.synced = informer.GetIndexer(), informer.HasSynced
	for key, w := range o.watches {
		o.startLocked(key, w)
	}
	o.mu.Unlock()
	informer.RunWithContext(ctx)
}

// Track makes the watches match what pods reference: called with the
// whole set of API pods on every change, before the pods are handed on.
func (o *Manager) Track(pods []*corev1.Pod) {
	want := map[objectKey]map[types.UID]bool{}
	live := map[types.UID]bool{}
	for _, p := range pods {
		live[p.UID] = true
		for _, key := range references(p) {
			if want[key] == nil {
				want[key] = map[types.UID]bool{}
			}
			want[key][p.UID] = true
		}
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	for key, w := range o.watches {
		if _, ok := want[key]; !ok {
			if w.stop != nil {
				w.stop()
			}
			delete(o.watches, key)
			o.log.Debug("stopped watching", "kind", key.kind, "namespace", key.namespace, "name", key.name)
		}
	}
	for key, uids := range want {
		w := o.watches[key]
		if w == nil {
			w = &objectWatch{}
			o.watches[key] = w
			o.startLocked(key, w)
		}
		w.pods = uids
	}
	for key := range o.tokens {
		if !live[key.pod] {
			delete(o.tokens, key)
		}
	}
}

// references lists the configMaps and secrets a pod names: volumes,
// projections, env, envFrom and image pull secrets.
func references(p *corev1.Pod) []objectKey {
	var out []objectKey
	add := func(kind, name string) {
		if k := (objectKey{kind, p.Namespace, name}); name != "" && !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	for _, v := range p.Spec.Volumes {
		switch {
		case v.ConfigMap != nil:
			add("configmaps", v.ConfigMap.Name)
		case v.Secret != nil:
			add("secrets", v.Secret.SecretName)
		case v.Projected != nil:
			for _, s := range v.Projected.Sources {
				if s.ConfigMap != nil {
					add("configmaps", s.ConfigMap.Name)
				}
				if s.Secret != nil {
					add("secrets", s.Secret.Name)
				}
			}
		}
	}
	for _, cs := range [][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for _, c := range cs {
			for _, e := range c.EnvFrom {
				if e.ConfigMapRef != nil {
					add("configmaps", e.ConfigMapRef.Name)
				}
				if e.SecretRef != nil {
					add("secrets", e.SecretRef.Name)
				}
			}
			for _, e := range c.Env {
				if e.ValueFrom != nil && e.ValueFrom.ConfigMapKeyRef != nil {
					add("configmaps", e.ValueFrom.ConfigMapKeyRef.Name)
				}
				if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
					add("secrets", e.ValueFrom.SecretKeyRef.Name)
				}
			}
		}
	}
	for _, s := range p.Spec.ImagePullSecrets {
		add("secrets", s.Name)
	}
	return out
}

// startLocked starts the watch of one object, once there is a client.
func (o *Manager) startLocked(key objectKey, w *objectWatch) {
	if o.cs == nil || w.store != nil {
		return
	}
	var obj runtime.Object = &corev1.ConfigMap{}
	if key.kind == "secrets" {
		obj = &corev1.Secret{}
	}
	lw := cache.NewListWatchFromClient(o.cs.CoreV1().RESTClient(), key.kind, key.namespace, fields.OneTermEqualSelector("metadata.name", key.name))
	informer := cache.NewSharedIndexInformer(lw, obj, 0, cache.Indexers{})
	changed := func(any) { o.changed(key) }
	informer.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: changed, UpdateFunc: func(_, n any) { changed(n) }, DeleteFunc: changed})
	ctx, stop := context.WithCancel(o.ctx)
	w.store, w.synced, w.stop = informer.GetStore(), informer.HasSynced, stop
	go informer.RunWithContext(ctx)
	o.log.Debug("watching", "kind", key.kind, "namespace", key.namespace, "name", key.name)
}

// changed wakes the pods that reference the object.
func (o *Manager) changed(key objectKey) {
	o.mu.Lock()
	var uids []types.UID
	if w := o.watches[key]; w != nil {
		for uid := range w.pods {
			uids = append(uids, uid)
		}
	}
	o.mu.Unlock()
	for _, uid := range uids {
		o.wake(uid)
	}
}

// syncWait bounds the wait for an object's first list.
const syncWait = 10 * time.Second

// get reads an object from its watch once the watch has listed; an object
// no pod tracks (yet) is read directly.
func (o *Manager) get(ctx context.Context, kind, namespace, name string) (any, error) {
	o.mu.Lock()
	w, cs := o.watches[objectKey{kind, namespace, name}], o.cs
	o.mu.Unlock()
	notFound := apierrors.NewNotFound(schema.GroupResource{Resource: strings.TrimSuffix(kind, "s")}, name)
	if cs == nil {
		return nil, fmt.Errorf("%s %q: not connected to the API server yet", strings.TrimSuffix(kind, "s"), name)
	}
	if w == nil || w.store == nil {
		if kind == "secrets" {
			return cs.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
		}
		return cs.CoreV1().ConfigMaps(namespace).Get(ctx, name, metav1.GetOptions{})
	}
	if !w.synced() {
		wctx, cancel := context.WithTimeout(ctx, syncWait)
		defer cancel()
		if !cache.WaitForCacheSync(wctx.Done(), w.synced) {
			return nil, fmt.Errorf("%s %q: not listed from the API server within %s", strings.TrimSuffix(kind, "s"), name, syncWait)
		}
	}
	obj, ok, err := w.store.GetByKey(namespace + "/" + name)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, notFound
	}
	return obj, nil
}

// ConfigMap returns the configMap; the object is shared, not to be
// modified. A missing one is NotFound.
func (o *Manager) ConfigMap(ctx context.Context, namespace, name string) (*corev1.ConfigMap, error) {
	obj, err := o.get(ctx, "configmaps", namespace, name)
	if err != nil {
		return nil, err
	}
	return obj.(*corev1.ConfigMap), nil
}

// Secret returns the secret; the object is shared, not to be modified.
func (o *Manager) Secret(ctx context.Context, namespace, name string) (*corev1.Secret, error) {
	obj, err := o.get(ctx, "secrets", namespace, name)
	if err != nil {
		return nil, err
	}
	return obj.(*corev1.Secret), nil
}

// maxTokenAge is how long a token is used at most, whatever its lifetime
// (the kubelet's token manager).
const maxTokenAge = 24 * time.Hour

// Token returns a token of the pod's service account bound to the pod,
// requested again once 80 % of its lifetime (at most 24 h) has passed, and
// when that is.
func (o *Manager) Token(ctx context.Context, pod *corev1.Pod, p *corev1.ServiceAccountTokenProjection) (string, time.Time, error) {
	account := pod.Spec.ServiceAccountName
	if account == "" {
		account = "default"
	}
	key := tokenKey{pod: pod.UID, account: account, audience: p.Audience}
	if p.ExpirationSeconds != nil {
		key.expiration = *p.ExpirationSeconds
	}
	now := o.clock.Now()
	o.mu.Lock()
	cached, ok := o.tokens[key]
	cs := o.cs
	o.mu.Unlock()
	if ok && now.Before(cached.refresh) {
		return cached.token, cached.refresh, nil
	}
	if cs == nil {
		return "", time.Time{}, fmt.Errorf("service account %q token: not connected to the API server yet", account)
	}
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: p.ExpirationSeconds,
		BoundObjectRef:    &authenticationv1.BoundObjectReference{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID},
	}}
	if p.Audience != "" {
		req.Spec.Audiences = []string{p.Audience}
	}
	tr, err := cs.CoreV1().ServiceAccounts(pod.Namespace).CreateToken(ctx, account, req, metav1.CreateOptions{})
	if err != nil {
		return "", time.Time{}, err
	}
	life := tr.Status.ExpirationTimestamp.Sub(now)
	if life <= 0 {
		return "", time.Time{}, fmt.Errorf("service account %q token: the API server issued one already expired (%s)", account, tr.Status.ExpirationTimestamp)
	}
	refresh := now.Add(min(life*8/10, maxTokenAge))
	o.mu.Lock()
	o.tokens[key] = cachedToken{token: tr.Status.Token, refresh: refresh}
	o.mu.Unlock()
	return tr.Status.Token, refresh, nil
}

// masterServices are the services in "default" whose variables every pod
// gets, service links or not.
var masterServices = []string{"kubernetes"}

// Services lists the services whose variables a pod in namespace gets:
// its namespace's (with service links) and the API server's. Until the
// first list has arrived it fails, as the kubelet's does: variables
// missing at a container's start would never come.
func (o *Manager) Services(namespace string, links bool) ([]*corev1.Service, error) {
	o.mu.Lock()
	store, synced := o.services, o.synced
	o.mu.Unlock()
	if store == nil || !synced() {
		return nil, fmt.Errorf("services have not yet been read at least once, cannot construct envvars")
	}
	byName := map[string]*corev1.Service{}
	if links {
		// The pod's namespace only, from the index: a container start
		// does not walk every service of the cluster.
		objs, err := store.ByIndex(cache.NamespaceIndex, namespace)
		if err != nil {
			return nil, err
		}
		for _, obj := range objs {
			if s := obj.(*corev1.Service); hasClusterIP(s) {
				byName[s.Name] = s
			}
		}
	}
	for _, name := range masterServices {
		if _, taken := byName[name]; taken {
			continue // the pod's namespace has its own, as the kubelet keeps
		}
		obj, ok, err := store.GetByKey(metav1.NamespaceDefault + "/" + name)
		if err != nil {
			return nil, err
		}
		if s, _ := obj.(*corev1.Service); ok && hasClusterIP(s) {
			byName[name] = s
		}
	}
	out := make([]*corev1.Service, 0, len(byName))
	for _, s := range byName {
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b *corev1.Service) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

func hasClusterIP(s *corev1.Service) bool {
	return s.Spec.ClusterIP != "" && s.Spec.ClusterIP != corev1.ClusterIPNone
}

// RuntimeHandler resolves a runtime class to the CRI handler it names.
func (o *Manager) RuntimeHandler(ctx context.Context, class string) (string, error) {
	o.mu.Lock()
	cs := o.cs
	o.mu.Unlock()
	if cs == nil {
		return "", fmt.Errorf("runtime class %q: not connected to the API server yet", class)
	}
	rc, err := cs.NodeV1().RuntimeClasses().Get(ctx, class, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	return rc.Handler, nil
}
