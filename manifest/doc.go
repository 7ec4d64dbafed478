// Package manifest reads a static pod manifest the way the kubelet does
// and the API server would: one Pod per file, defaulted, validated with the
// API server's ranges, named and identified as a static pod of its node.
// The agent's file source and nodectl's local mode both use it.
package manifest

import (
	"strings"

	"nodeagent/api"
)

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

// AgentPrefix starts every annotation the agent itself writes on pods.
const AgentPrefix = "nodeagent.io/"

// AgentOwned reports whether a pod annotation is the agent's to set: its
// own (nodeagent.io/...) and the source's bookkeeping (config.source,
// config.hash). A pod from the API server never brings these: its author
// could otherwise name the file nodectl delete removes, or pass for a
// static pod.
func AgentOwned(key string) bool {
	return strings.HasPrefix(key, AgentPrefix) || key == AnnotationConfigSource || key == AnnotationConfigHash
}
