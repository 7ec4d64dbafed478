// Package conformance is the node conformance suite `nodetest conformance`
// runs: cases that mirror the kubelet's NodeConformance tests, run against
// a live agent through its public interfaces only (pod manifests in; /pods,
// /node, /configz, the container logs and the node's cgroup files out), so
// it validates any install of the agent, not just a test build.
package conformance
