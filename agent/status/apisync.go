package status

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"nodeagent/agent/source"
	"nodeagent/internal/notify"
	"nodeagent/manifest"
)

// APIPods is what the API server last showed of the node's pods (the API
// source's cache).
type APIPods interface {
	Pod(namespace, name string) (*corev1.Pod, bool)
}

// Local is the agent's own statuses (the Store).
type Local interface {
	Get(uid types.UID) (*corev1.Pod, bool)
	List() []corev1.Pod
}

// APISync writes the agent's pod statuses to the API server, as the
// kubelet's status manager does: a strategic-merge patch of
// pods/<name>/status carrying metadata.uid (so a pod of the same name and
// another UID is never written), coalesced per pod, retried with back-off,
// and a full pass every ResyncPeriod. A static pod's status goes to its
// mirror pod. A deleted pod whose containers and volumes are gone gets its
// final status written, then is deleted from the API (grace 0, UID
// precondition).
type APISync struct {
	client  func(context.Context) (kubernetes.Interface, error)
	local   Local
	api     APIPods
	changes *notify.Set[types.UID]
	gone    *notify.Set[podKey]
	clock   clock.WithTicker
	log     *slog.Logger

	last    map[types.UID]*corev1.Pod // the API's answer to our last patch
	retries map[types.UID]retry

	mu     sync.Mutex
	finals map[types.UID]corev1.PodStatus // gone pods' last status, until deleted
}

type podKey struct {
	namespace, name string
	uid             types.UID
}

type retry struct {
	at    time.Time
	delay time.Duration
}

// ResyncPeriod is how often every status is compared with the API's (the
// kubelet's status manager syncs in batches every 10 s).
const ResyncPeriod = 10 * time.Second

// NewAPISync returns an APISync fed by changes (the status store's
// subscription).
func NewAPISync(client func(context.Context) (kubernetes.Interface, error), local Local, api APIPods, changes *notify.Set[types.UID], clk clock.WithTicker, log *slog.Logger) *APISync {
	return &APISync{client: client, local: local, api: api, changes: changes, gone: notify.NewSet[podKey](), clock: clk, log: log,
		last: map[types.UID]*corev1.Pod{}, retries: map[types.UID]retry{}, finals: map[types.UID]corev1.PodStatus{}}
}

// Gone is the pod manager's word that a pod has nothing left on the node,
// with its last status; a deleted API pod is then removed from the API
// server once that status is written.
func (s *APISync) Gone(pod *corev1.Pod) {
	if !source.FromAPI(pod) {
		return
	}
	if pod.Status.Phase != "" {
		s.mu.Lock()
		s.finals[pod.UID] = *pod.Status.DeepCopy()
		s.mu.Unlock()
	}
	s.gone.Add(podKey{namespace: pod.Namespace, name: pod.Name, uid: pod.UID})
}

// Run syncs until ctx ends.
func (s *APISync) Run(ctx context.Context) {
	client, err := s.client(ctx)
	if err != nil {
		return
	}
	resync := s.clock.NewTicker(ResyncPeriod)
	defer resync.Stop()
	retryTick := s.clock.NewTicker(time.Second)
	defer retryTick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.changes.Ready():
			for _, uid := range s.changes.Take() {
				s.sync(ctx, client, uid)
			}
		case <-s.gone.Ready():
			for _, k := range s.gone.Take() {
				s.delete(ctx, client, k)
			}
		case <-retryTick.C():
			now := s.clock.Now()
			for uid, r := range s.retries {
				if !now.Before(r.at) {
					s.sync(ctx, client, uid)
				}
			}
		case <-resync.C():
			for _, p := range s.local.List() {
				s.sync(ctx, client, p.UID)
			}
		}
	}
}

// sync sends one pod's status if the API's differs.
func (s *APISync) sync(ctx context.Context, client kubernetes.Interface, uid types.UID) {
	local, ok := s.local.Get(uid)
	if !ok {
		delete(s.retries, uid)
		delete(s.last, uid)
		return
	}
	target, ok := s.target(local)
	if !ok {
		delete(s.retries, uid)
		return
	}
	err := s.write(ctx, client, uid, target, local.Status)
	if err == nil {
		delete(s.retries, uid)
		return
	}
	if apierrors.IsNotFound(err) || ctx.Err() != nil {
		delete(s.retries, uid)
		return
	}
	r := s.retries[uid]
	r.delay = min(max(2*r.delay, time.Second), 30*time.Second)
	r.at = s.clock.Now().Add(r.delay)
	s.retries[uid] = r
	s.log.Warn("pod status not written; retrying", "pod", local.Namespace+"/"+local.Name, "pod_uid", uid, "err", err, "retry_in", r.delay)
}

// write patches target's status to status (with the conditions others
// own kept) unless the API already has it; uid is the local pod's.
func (s *APISync) write(ctx context.Context, client kubernetes.Interface, uid types.UID, target *corev1.Pod, status corev1.PodStatus) error {
	if last := s.last[uid]; last != nil && last.UID == target.UID && newer(last, target) {
		target = last
	}
	want := mergeStatus(target, status)
	normalize(&want)
	if equality.Semantic.DeepEqual(want, target.Status) {
		return nil
	}
	patch, err := podStatusPatch(target.UID, target.Status, want)
	if err != nil {
		return err
	}
	updated, err := client.CoreV1().Pods(target.Namespace).Patch(ctx, target.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil {
		return err
	}
	s.last[uid] = updated
	return nil
}

// target is the API object a local pod's status goes to: the API pod of
// the same UID, or a static pod's mirror pod.
func (s *APISync) target(local *corev1.Pod) (*corev1.Pod, bool) {
	p, ok := s.api.Pod(local.Namespace, local.Name)
	if !ok {
		return nil, false
	}
	if source.FromAPI(local) {
		return p, p.UID == local.UID
	}
	// The mirror of this very static pod: an edited static pod's successor
	// does not write over its predecessor's mirror while that one stops.
	hash, mirror := p.Annotations[source.AnnotationMirror]
	return p, mirror && hash == local.Annotations[manifest.AnnotationConfigHash]
}

// delete removes a deleted pod whose containers and volumes are gone.
func (s *APISync) delete(ctx context.Context, client kubernetes.Interface, k podKey) {
	p, ok := s.api.Pod(k.namespace, k.name)
	if !ok || p.UID != k.uid || p.DeletionTimestamp == nil {
		s.forget(k.uid)
		return
	}
	s.mu.Lock()
	final, hasFinal := s.finals[k.uid]
	s.mu.Unlock()
	var err error
	if hasFinal {
		err = s.write(ctx, client, k.uid, p, final)
	}
	if err == nil {
		err = client.CoreV1().Pods(k.namespace).Delete(ctx, k.name, metav1.DeleteOptions{
			GracePeriodSeconds: ptr.To[int64](0),
			Preconditions:      &metav1.Preconditions{UID: &k.uid},
		})
	}
	switch {
	case err == nil:
		s.forget(k.uid)
		s.log.Info("pod deleted from the API server after termination", "pod", k.namespace+"/"+k.name, "pod_uid", k.uid)
	case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
		s.forget(k.uid)
	case ctx.Err() == nil:
		s.log.Warn("deleting the terminated pod failed; retrying", "pod", k.namespace+"/"+k.name, "err", err)
		go func() {
			t := s.clock.NewTimer(2 * time.Second)
			defer t.Stop()
			select {
			case <-ctx.Done():
			case <-t.C():
				s.gone.Add(k)
			}
		}()
	}
}

// forget drops what was kept for a gone pod.
func (s *APISync) forget(uid types.UID) {
	s.mu.Lock()
	delete(s.finals, uid)
	s.mu.Unlock()
	delete(s.last, uid)
}

// kubeletConditions are the pod conditions the node owns, PodScheduled
// among them (the kubelet's PodConditionsByKubelet); the others
// (readiness gates, DisruptionTarget set by the control plane) are kept
// as the API has them.
var kubeletConditions = map[corev1.PodConditionType]bool{
	corev1.PodScheduled: true, corev1.PodReadyToStartContainers: true, corev1.PodInitialized: true,
	corev1.ContainersReady: true, corev1.PodReady: true, corev1.AllContainersRestarting: true,
	corev1.PodResizePending: true, corev1.PodResizeInProgress: true,
}

// mergeStatus is the status to write: the agent's, with the conditions
// and fields others own kept from the API, and Ready held False while a
// readiness gate is not True. Fields newer than the agent's API types are
// never decoded, so the patch cannot remove them.
func mergeStatus(api *corev1.Pod, local corev1.PodStatus) corev1.PodStatus {
	out := *local.DeepCopy()
	var conds []corev1.PodCondition
	for _, c := range out.Conditions {
		if kubeletConditions[c.Type] || c.Type == corev1.DisruptionTarget {
			conds = append(conds, c)
		}
	}
	for _, c := range api.Status.Conditions {
		if !kubeletConditions[c.Type] && !hasCondition(conds, c.Type) {
			conds = append(conds, c)
		}
	}
	// Pods bound without the scheduler have no PodScheduled; the kubelet
	// reports it True for every pod it runs.
	if !hasCondition(conds, corev1.PodScheduled) {
		conds = append(conds, corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue})
	}
	out.Conditions = conds
	// Not the node's, as in the kubelet's mergePodStatus: DRA's claim
	// statuses, and the scheduler's nomination.
	out.ResourceClaimStatuses = api.Status.ResourceClaimStatuses
	out.ExtendedResourceClaimStatus = api.Status.ExtendedResourceClaimStatus
	out.NodeAllocatableResourceClaimStatuses = api.Status.NodeAllocatableResourceClaimStatuses
	out.NominatedNodeName = api.Status.NominatedNodeName
	if msg := gatesNotReady(api.Spec.ReadinessGates, conds); msg != "" {
		for i := range out.Conditions {
			if c := &out.Conditions[i]; c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				c.Status, c.Reason, c.Message = corev1.ConditionFalse, "ReadinessGatesNotReady", msg
			}
		}
	}
	return out
}

// normalize truncates a status's times to the API's precision (RFC 3339
// seconds), as the kubelet's status manager does: compared with what the
// API server returns, the nanoseconds would differ at every resync and
// every running pod would be patched every ResyncPeriod.
func normalize(st *corev1.PodStatus) {
	seconds := func(t *metav1.Time) {
		if t != nil && !t.IsZero() {
			*t = t.Rfc3339Copy()
		}
	}
	seconds(st.StartTime)
	for i := range st.Conditions {
		seconds(&st.Conditions[i].LastProbeTime)
		seconds(&st.Conditions[i].LastTransitionTime)
	}
	for _, list := range [][]corev1.ContainerStatus{st.InitContainerStatuses, st.ContainerStatuses, st.EphemeralContainerStatuses} {
		for i := range list {
			for _, state := range []*corev1.ContainerState{&list[i].State, &list[i].LastTerminationState} {
				if state.Running != nil {
					seconds(&state.Running.StartedAt)
				}
				if state.Terminated != nil {
					seconds(&state.Terminated.StartedAt)
					seconds(&state.Terminated.FinishedAt)
				}
			}
		}
	}
}

func hasCondition(conds []corev1.PodCondition, t corev1.PodConditionType) bool {
	for _, c := range conds {
		if c.Type == t {
			return true
		}
	}
	return false
}

// gatesNotReady words the first readiness gate that is not True, as the
// kubelet does; "" when all are.
func gatesNotReady(gates []corev1.PodReadinessGate, conds []corev1.PodCondition) string {
	for _, g := range gates {
		found := false
		for _, c := range conds {
			if c.Type != g.ConditionType {
				continue
			}
			found = true
			if c.Status != corev1.ConditionTrue {
				return fmt.Sprintf("the status of pod readiness gate %q is not \"True\", but %s", g.ConditionType, c.Status)
			}
		}
		if !found {
			return fmt.Sprintf("corresponding condition of pod readiness gate %q does not exist.", g.ConditionType)
		}
	}
	return ""
}

// podStatusPatch is the kubelet's status patch: the strategic-merge
// difference, with metadata.uid so that it applies to that pod only.
func podStatusPatch(uid types.UID, old, want corev1.PodStatus) ([]byte, error) {
	oldData, err := json.Marshal(corev1.Pod{Status: old})
	if err != nil {
		return nil, err
	}
	newData, err := json.Marshal(corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: uid}, Status: want})
	if err != nil {
		return nil, err
	}
	return strategicpatch.CreateTwoWayMergePatch(oldData, newData, corev1.Pod{})
}

// newer reports whether a's resource version is after b's (etcd
// revisions, compared as numbers).
func newer(a, b *corev1.Pod) bool {
	ra, err1 := strconv.ParseUint(a.ResourceVersion, 10, 64)
	rb, err2 := strconv.ParseUint(b.ResourceVersion, 10, 64)
	return err1 == nil && err2 == nil && ra > rb
}
