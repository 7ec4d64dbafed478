// Package version holds the build's version, set by the Makefile with
// -ldflags "-X nodeagent/internal/version.Version=...".
package version

// Version of this build.
var Version = "dev"

// Kubernetes is the Kubernetes minor version whose API types and kubelet
// behaviour the agent follows; probes send it as kube-probe/<Kubernetes>.
const Kubernetes = "1.34"
