package events

import (
	"context"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
)

// APISink sends the agent's events to the API server through client-go's
// broadcaster (which folds repeats and bounds the rate), with source
// component "kubelet" and host the node name. Events before the node joined
// stay in the agent's memory only (/events).
type APISink struct {
	node     string
	recorder atomic.Pointer[sink]
}

type sink struct{ record.EventRecorder }

// NewAPISink returns an event sink; Run starts sending.
func NewAPISink(node string) *APISink { return &APISink{node: node} }

// Forward is the Recorder's hook.
func (e *APISink) Forward(ref corev1.ObjectReference, annotations map[string]string, eventType, reason, message string) {
	r := e.recorder.Load()
	switch {
	case r == nil:
	case len(annotations) > 0:
		r.AnnotatedEventf(&ref, annotations, eventType, reason, "%s", message)
	default:
		r.Event(&ref, eventType, reason, message)
	}
}

// Run sends events once client is connected, until ctx ends.
func (e *APISink) Run(ctx context.Context, client func(context.Context) (kubernetes.Interface, error)) {
	c, err := client(ctx)
	if err != nil {
		return
	}
	b := record.NewBroadcaster(record.WithContext(ctx))
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: c.CoreV1().Events("")})
	r := b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: Component, Host: e.node})
	e.recorder.Store(&sink{r})
	<-ctx.Done()
	e.recorder.Store(nil)
	b.Shutdown()
}
