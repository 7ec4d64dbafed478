// Package source turns pod inputs into the desired set of pods. Today the
// only source is a static manifest directory (File), read with the
// kubelet's static-pod rules; the API server will plug in beside it later,
// producing the same Update.
package source

import corev1 "k8s.io/api/core/v1"

// Update is the complete desired set of one source at one moment: every pod
// it wants running, and every input it could not turn into a pod.
type Update struct {
	Pods   []*corev1.Pod
	Errors []ManifestError
}

// ManifestError is an input that did not become a pod, and why.
type ManifestError struct {
	File string
	Err  error
}

func (e ManifestError) Error() string { return e.File + ": " + e.Err.Error() }
