package node

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
)

// ObjectOptions shape the Node object, from the KubeletConfiguration and
// flags.
type ObjectOptions struct {
	Register bool              // registerNode: create the Node (else it must exist)
	Labels   map[string]string // --node-labels
	Taints   []corev1.Taint    // registerWithTaints, set when the Node is created
	// UpdateFrequency is how often the status is checked and sent when it
	// changed; ReportFrequency how often it is sent anyway.
	UpdateFrequency, ReportFrequency time.Duration
	MaxImages                        int // nodeStatusMaxImages; -1: all
	KubeletPort                      int32
}

// maxNamesPerImage is how many of an image's names the kubelet lists.
const maxNamesPerImage = 5

// APISync registers the node and keeps its status in the API server, as
// the kubelet's node status loop does: a strategic-merge patch of
// nodes/<name>/status when the status changed or the report period ran
// out, and a new registration when the Node was deleted.
type APISync struct {
	client kubernetes.Interface
	name   string
	opts   ObjectOptions
	build  func(now time.Time) *corev1.Node // the node as the agent sees it
	images func(ctx context.Context) ([]corev1.ContainerImage, error)
	clock  clock.Clock
	log    *slog.Logger

	current *corev1.Node      // as the API server last returned it; nil: not registered
	sent    corev1.NodeStatus // the last status sent, heartbeats cleared
	sentAt  time.Time
	// published are the resources the agent ever reported: one of them
	// missing now is gone (a device plugin's); any other on the Node was
	// put there by someone else and is kept.
	published map[corev1.ResourceName]bool
}

// NewAPISync returns an APISync; build gives the node's status, images
// the runtime's images.
func NewAPISync(client kubernetes.Interface, name string, opts ObjectOptions, build func(time.Time) *corev1.Node,
	images func(context.Context) ([]corev1.ContainerImage, error), clk clock.Clock, log *slog.Logger) *APISync {
	return &APISync{client: client, name: name, opts: opts, build: build, images: images, clock: clk, log: log}
}

// Registered is the Node as last seen, or nil before registration.
func (s *APISync) Registered() *corev1.Node { return s.current }

// Sync registers the node if it is not (or no longer) registered, then
// sends its status if it changed or the report period ran out.
func (s *APISync) Sync(ctx context.Context) error {
	want := s.desired(ctx) // once: it lists the runtime's images
	if s.current == nil {
		if err := s.register(ctx, want); err != nil {
			return err
		}
	}
	err := s.sendStatus(ctx, want.Status)
	if apierrors.IsNotFound(err) {
		s.log.Warn("the Node object was deleted; registering again", "node", s.name)
		s.current = nil
		if err := s.register(ctx, want); err != nil {
			return err
		}
		err = s.sendStatus(ctx, want.Status)
	}
	return err
}

// desired is the node as the agent would register it.
func (s *APISync) desired(ctx context.Context) *corev1.Node {
	now := s.clock.Now()
	n := s.build(now)
	maps.Copy(n.Labels, s.opts.Labels)
	n.Spec.Taints = append([]corev1.Taint(nil), s.opts.Taints...)
	n.Status.DaemonEndpoints.KubeletEndpoint.Port = s.opts.KubeletPort
	if s.images != nil {
		imgs, err := s.images(ctx)
		if err != nil {
			s.log.Warn("node status: cannot list images", "err", err)
		}
		n.Status.Images = topImages(imgs, s.opts.MaxImages)
	}
	return n
}

// register creates the Node, or adopts the one of the same name: the
// labels the agent owns are set on it, the rest kept.
func (s *APISync) register(ctx context.Context, desired *corev1.Node) error {
	want := *desired // unchanged but for the type, which a create does not carry
	want.TypeMeta = metav1.TypeMeta{}
	nodes := s.client.CoreV1().Nodes()
	if s.opts.Register {
		created, err := nodes.Create(ctx, &want, metav1.CreateOptions{})
		if err == nil {
			s.log.Info("registered the node", "node", s.name)
			s.current = created
			return nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("register node %s: %w", s.name, err)
		}
	}
	existing, err := nodes.Get(ctx, s.name, metav1.GetOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) && !s.opts.Register {
			return fmt.Errorf("node %s does not exist and registerNode is false: create it, or set registerNode: true", s.name)
		}
		return fmt.Errorf("get node %s: %w", s.name, err)
	}
	adopted := existing.DeepCopy()
	if adopted.Labels == nil {
		adopted.Labels = map[string]string{}
	}
	maps.Copy(adopted.Labels, want.Labels)
	if adopted.Annotations == nil {
		adopted.Annotations = map[string]string{}
	}
	maps.Copy(adopted.Annotations, want.Annotations)
	if !equality.Semantic.DeepEqual(adopted.ObjectMeta, existing.ObjectMeta) {
		if adopted, err = nodes.Update(ctx, adopted, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("update labels of node %s: %w", s.name, err)
		}
	}
	s.log.Info("adopted the existing Node object", "node", s.name)
	s.current = adopted
	s.sentAt = time.Time{}
	return nil
}

// sendStatus patches the status when it changed or is due. The Node is
// read first, from the API server's cache as the kubelet does: that is how
// a deleted Node is noticed, and the patch is made against what is there.
func (s *APISync) sendStatus(ctx context.Context, want corev1.NodeStatus) error {
	cur, err := s.client.CoreV1().Nodes().Get(ctx, s.name, metav1.GetOptions{ResourceVersion: "0"})
	if err != nil {
		return err
	}
	if cur.UID != s.current.UID {
		return apierrors.NewNotFound(corev1.Resource("nodes"), s.name) // deleted and made again by someone else
	}
	s.current = cur
	want = s.keepUnowned(cur.Status, want)
	now := s.clock.Now()
	cmp := withoutHeartbeats(want)
	if !s.sentAt.IsZero() && equality.Semantic.DeepEqual(cmp, s.sent) && now.Sub(s.sentAt) < s.opts.ReportFrequency {
		return nil
	}
	patch, err := nodeStatusPatch(s.current, want)
	if err != nil {
		return err
	}
	updated, err := s.client.CoreV1().Nodes().Patch(ctx, s.name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil {
		return err
	}
	s.current, s.sent, s.sentAt = updated, cmp, now
	return nil
}

// keepUnowned adds to want what others put in the Node's status, so the
// patch does not remove it, as the kubelet's setters change the fetched
// Node in place: extended resources advertised through the API, the
// conditions of other components (node-problem-detector's), and the
// attach/detach controller's volumesAttached. Fields newer than the
// agent's API types never reach the patch at all.
func (s *APISync) keepUnowned(cur, want corev1.NodeStatus) corev1.NodeStatus {
	if s.published == nil {
		s.published = map[corev1.ResourceName]bool{}
	}
	for _, l := range []corev1.ResourceList{want.Capacity, want.Allocatable} {
		for name := range l {
			s.published[name] = true
		}
	}
	keep := func(have, into corev1.ResourceList) corev1.ResourceList {
		for name, q := range have {
			if _, ok := into[name]; !ok && !s.published[name] {
				if into == nil {
					into = corev1.ResourceList{}
				}
				into[name] = q
			}
		}
		return into
	}
	want = *want.DeepCopy()
	want.Capacity = keep(cur.Capacity, want.Capacity)
	want.Allocatable = keep(cur.Allocatable, want.Allocatable)
	owned := map[corev1.NodeConditionType]bool{}
	for _, c := range want.Conditions {
		owned[c.Type] = true
	}
	for _, c := range cur.Conditions {
		if !owned[c.Type] {
			want.Conditions = append(want.Conditions, c)
		}
	}
	want.VolumesAttached = cur.VolumesAttached
	return want
}

// nodeStatusPatch is the strategic-merge patch from cur's status to want.
// Addresses are replaced whole: their merge key (type) is not unique, so
// a merge would keep stale entries (the kubelet patches them the same way).
func nodeStatusPatch(cur *corev1.Node, want corev1.NodeStatus) ([]byte, error) {
	oldData, err := json.Marshal(corev1.Node{Status: cur.Status})
	if err != nil {
		return nil, err
	}
	newData, err := json.Marshal(corev1.Node{Status: want})
	if err != nil {
		return nil, err
	}
	patch, err := strategicpatch.CreateTwoWayMergePatch(oldData, newData, corev1.Node{})
	if err != nil {
		return nil, err
	}
	if equality.Semantic.DeepEqual(cur.Status.Addresses, want.Addresses) {
		return patch, nil
	}
	var m map[string]any
	if err := json.Unmarshal(patch, &m); err != nil {
		return nil, err
	}
	status, _ := m["status"].(map[string]any)
	if status == nil {
		status = map[string]any{}
		m["status"] = status
	}
	addrs := []any{}
	for _, a := range want.Addresses {
		addrs = append(addrs, map[string]any{"type": a.Type, "address": a.Address})
	}
	status["addresses"] = append(addrs, map[string]any{"$patch": "replace"})
	delete(status, "$setElementOrder/addresses")
	return json.Marshal(m)
}

func withoutHeartbeats(st corev1.NodeStatus) corev1.NodeStatus {
	st = *st.DeepCopy()
	for i := range st.Conditions {
		st.Conditions[i].LastHeartbeatTime = metav1.Time{}
	}
	return st
}

// topImages are the largest images, at most max of them (-1: all), each
// with at most five names, as the kubelet lists them.
func topImages(imgs []corev1.ContainerImage, limit int) []corev1.ContainerImage {
	sort.SliceStable(imgs, func(i, j int) bool { return imgs[i].SizeBytes > imgs[j].SizeBytes })
	if limit >= 0 && len(imgs) > limit {
		imgs = imgs[:limit]
	}
	for i := range imgs {
		if len(imgs[i].Names) > maxNamesPerImage {
			imgs[i].Names = imgs[i].Names[:maxNamesPerImage]
		}
	}
	return imgs
}
