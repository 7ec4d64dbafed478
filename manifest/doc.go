// Package manifest reads a static pod manifest the way the kubelet does
// and the API server would: one Pod per file, defaulted, validated with the
// API server's ranges, named and identified as a static pod of its node.
// The agent's file source and nodectl's local mode both use it.
package manifest

import "nodeagent/api"

// Annotations the sources set on every pod.
const (
	AnnotationConfigSource = "kubernetes.io/config.source"
	AnnotationConfigHash   = "kubernetes.io/config.hash"
	// AnnotationManifest is the file a static pod came from (nodectl uses it
	// to delete the pod).
	AnnotationManifest = api.AnnotationManifest
	// SourceFile is the config.source value of static file pods.
	SourceFile = "file"
)
