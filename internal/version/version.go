// Package version holds the build's version, set by the Makefile with
// -ldflags "-X nodeagent/internal/version.Version=...".
package version

import (
	"runtime/debug"
	"strings"
)

// Version of this build.
var Version = "dev"

// Kubernetes is the Kubernetes minor version whose API types and kubelet
// behaviour the agent follows; probes send it as kube-probe/<Kubernetes>.
const Kubernetes = "1.37"

// KubeletVersion is what the node reports as its kubeletVersion: the
// Kubernetes release of the API types built in, as semver, with the
// agent's own version as build metadata ("v1.37.2+nodeagent.0.1.0", as k3s
// reports "v1.37.2+k3s1"). Tools that compare kubelet versions (version
// skew checks, the e2e suite's [MinimumKubeletVersion] tags) parse it.
func KubeletVersion() string {
	release := "v" + Kubernetes + ".0"
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, m := range info.Deps {
			// k8s.io/api v0.37.2 is Kubernetes v1.37.2.
			if m.Path == "k8s.io/api" && strings.HasPrefix(m.Version, "v0."+Kubernetes[2:]+".") {
				release = "v1" + strings.TrimPrefix(m.Version, "v0")
				if i := strings.IndexAny(release, "-+"); i >= 0 {
					release = release[:i]
				}
			}
		}
	}
	return release + "+nodeagent." + buildMetadata(Version)
}

// buildMetadata keeps what semver allows in build metadata.
func buildMetadata(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '-' || c == '.') {
			b[i] = '-'
		}
	}
	if md := strings.Trim(string(b), "."); md != "" {
		return md
	}
	return "unknown"
}
