// Package events records what the agent does to pods and the node, as
// corev1.Events in the kubelet's words (Pulling, Pulled, Created, Started,
// Killing, BackOff, Failed, ...), for the local API, nodectl and, in API-server mode, the
// API server. Repeats of the same event are folded into one with a count,
// as the kubelet's event correlator does. A Recorder is safe for concurrent
// use and never blocks.
package events

import (
	"fmt"
	"maps"
	"sort"
	"strconv"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"nodeagent/api"
)

// Component is the event source, as the kubelet names itself.
const Component = "kubelet"

// DefaultCapacity bounds how many events are kept.
const DefaultCapacity = 1000

// Recorder keeps the newest events in memory, and hands each to Forward
// when set (in API-server mode, the API server's event sink).
type Recorder struct {
	clock    clock.PassiveClock
	node     string
	capacity int
	forward  Forward

	mu     sync.Mutex
	seq    int
	events []*corev1.Event
	byKey  map[string]*corev1.Event
}

// Forward receives every event recorded, with its annotations (nil for
// most); it must not block.
type Forward func(ref corev1.ObjectReference, annotations map[string]string, eventType, reason, message string)

// NewRecorder returns a recorder for node keeping up to capacity events.
func NewRecorder(clk clock.PassiveClock, node string, capacity int) *Recorder {
	return NewForwardingRecorder(clk, node, capacity, nil)
}

// NewForwardingRecorder is NewRecorder, with every event also handed to
// forward.
func NewForwardingRecorder(clk clock.PassiveClock, node string, capacity int, forward Forward) *Recorder {
	if capacity <= 0 {
		capacity = DefaultCapacity
	}
	return &Recorder{clock: clk, node: node, capacity: capacity, forward: forward, byKey: map[string]*corev1.Event{}}
}

// PodRef refers to a pod, or with container set, to one of its containers
// (fieldPath spec.containers{name}, or spec.initContainers{name}).
func PodRef(pod *corev1.Pod, container string) corev1.ObjectReference {
	ref := corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID}
	if container == "" {
		return ref
	}
	field := "spec.containers"
	for _, c := range pod.Spec.InitContainers {
		if c.Name == container {
			field = "spec.initContainers"
		}
	}
	ref.FieldPath = fmt.Sprintf("%s{%s}", field, container)
	return ref
}

// NodeRef refers to the node.
func (r *Recorder) NodeRef() corev1.ObjectReference {
	return corev1.ObjectReference{Kind: "Node", Name: r.node, UID: types.UID(r.node)}
}

// Event records one event; eventType is corev1.EventTypeNormal or Warning.
func (r *Recorder) Event(ref corev1.ObjectReference, eventType, reason, message string) {
	r.EventOutput(ref, eventType, reason, message, "")
}

// EventOutput records an event whose message ends in what a container
// said (a probe's output, an HTTP body): the API server gets it whole, as
// from the kubelet; the events kept here, which the unauthenticated
// read-only port serves, say api.Redacted in its place.
func (r *Recorder) EventOutput(ref corev1.ObjectReference, eventType, reason, message, output string) {
	r.record(ref, nil, eventType, reason, message, output)
}

// AnnotatedEvent records an event with annotations, as the kubelet's
// Evicted event carries the starved resource and the offending
// containers.
func (r *Recorder) AnnotatedEvent(ref corev1.ObjectReference, annotations map[string]string, eventType, reason, message string) {
	r.record(ref, annotations, eventType, reason, message, "")
}

func (r *Recorder) record(ref corev1.ObjectReference, annotations map[string]string, eventType, reason, message, output string) {
	if r.forward != nil {
		r.forward(ref, annotations, eventType, reason, message+output)
	}
	if output != "" {
		message += api.Redacted
	}
	now := metav1.NewTime(r.clock.Now())
	key := string(ref.UID) + "\x00" + ref.FieldPath + "\x00" + eventType + "\x00" + reason + "\x00" + message
	r.mu.Lock()
	defer r.mu.Unlock()
	if e, ok := r.byKey[key]; ok {
		e.Count++
		e.LastTimestamp = now
		return
	}
	r.seq++
	e := &corev1.Event{
		TypeMeta:       metav1.TypeMeta{Kind: "Event", APIVersion: "v1"},
		ObjectMeta:     metav1.ObjectMeta{Name: ref.Name + "." + strconv.Itoa(r.seq), Namespace: ref.Namespace, Annotations: maps.Clone(annotations)},
		InvolvedObject: ref,
		Reason:         reason,
		Message:        message,
		Type:           eventType,
		Count:          1,
		FirstTimestamp: now,
		LastTimestamp:  now,
		Source:         corev1.EventSource{Component: Component, Host: r.node},
	}
	r.events = append(r.events, e)
	r.byKey[key] = e
	if len(r.events) > r.capacity {
		drop := r.events[:len(r.events)-r.capacity]
		for _, old := range drop {
			for k, v := range r.byKey {
				if v == old {
					delete(r.byKey, k)
				}
			}
		}
		r.events = append([]*corev1.Event(nil), r.events[len(drop):]...)
	}
}

// Eventf is Event with a formatted message.
func (r *Recorder) Eventf(ref corev1.ObjectReference, eventType, reason, format string, args ...any) {
	r.Event(ref, eventType, reason, fmt.Sprintf(format, args...))
}

// List returns copies of the events, oldest last-seen first.
func (r *Recorder) List() []corev1.Event {
	r.mu.Lock()
	out := make([]corev1.Event, 0, len(r.events))
	for _, e := range r.events {
		out = append(out, *e.DeepCopy())
	}
	r.mu.Unlock()
	sort.SliceStable(out, func(i, j int) bool { return out[i].LastTimestamp.Before(&out[j].LastTimestamp) })
	return out
}
