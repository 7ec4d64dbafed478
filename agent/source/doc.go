// Package source turns pod inputs into the desired set of pods: a static
// manifest directory (File), read with the kubelet's static-pod rules, and
// in API-server mode the pods bound to the node (API). The pod manager
// merges their updates.
package source

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Source produces the desired pods of one origin.
type Source interface {
	// Name tells the source's updates apart ("file", "api").
	Name() string
	// Run sends a complete Update whenever the source's desired set
	// changes, until ctx ends.
	Run(ctx context.Context, out chan<- Update)
}

// Update is the complete desired set of one source at one moment: every pod
// it wants running, and every input it could not turn into a pod.
type Update struct {
	Source string // the sending Source's Name
	Pods   []*corev1.Pod
	Errors []ManifestError
	// Grace holds the grace periods (seconds) that override their own for
	// pods that left the source in this update on request, as kubectl
	// delete --grace-period does.
	Grace map[types.UID]int64
}

// ManifestError is an input that did not become a pod, and why.
type ManifestError struct {
	File string
	Err  error
}

func (e ManifestError) Error() string { return e.File + ": " + e.Err.Error() }

// Observed is src with observe called on each of its updates before it is
// sent on.
func Observed(src Source, observe func(Update)) Source { return observed{src, observe} }

type observed struct {
	Source
	observe func(Update)
}

func (o observed) Run(ctx context.Context, out chan<- Update) {
	in := make(chan Update)
	done := make(chan struct{})
	go func() {
		defer close(done)
		o.Source.Run(ctx, in)
	}()
	defer func() { <-done }()
	for {
		select {
		case <-ctx.Done():
			return
		case u := <-in:
			o.observe(u)
			select {
			case out <- u:
			case <-ctx.Done():
				return
			}
		}
	}
}
