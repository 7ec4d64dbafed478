package cluster

import (
	"context"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"

	"nodeagent/agent/events"
)

// Events sends the agent's events to the API server through client-go's
// broadcaster (which folds repeats and bounds the rate), with source
// component "kubelet" and host the node name. Events before the node joined
// stay in the agent's memory only (/events).
type Events struct {
	node     string
	recorder atomic.Pointer[sink]
}

type sink struct{ record.EventRecorder }

// NewEvents returns an event sink; Run starts sending.
func NewEvents(node string) *Events { return &Events{node: node} }

// Forward is the events.Recorder's hook.
func (e *Events) Forward(ref corev1.ObjectReference, eventType, reason, message string) {
	if r := e.recorder.Load(); r != nil {
		r.Event(&ref, eventType, reason, message)
	}
}

// Run sends events once client is connected, until ctx ends.
func (e *Events) Run(ctx context.Context, client func(context.Context) (kubernetes.Interface, error)) {
	c, err := client(ctx)
	if err != nil {
		return
	}
	b := record.NewBroadcaster(record.WithContext(ctx))
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: c.CoreV1().Events("")})
	r := b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: events.Component, Host: e.node})
	e.recorder.Store(&sink{r})
	<-ctx.Done()
	e.recorder.Store(nil)
	b.Shutdown()
}
