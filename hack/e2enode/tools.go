//go:build tools

// Package e2enode pins what make conformance-upstream builds from
// k8s.io/kubernetes at the release in go.mod: the node e2e suite
// (go test -c k8s.io/kubernetes/test/e2e_node), ginkgo, agnhost, the
// suite's test image, and the kubelet, the peer nodeagent is measured
// against. It is its own module so that neither the agent's
// go.mod nor the control plane's carry the suite's dependencies.
package e2enode

import (
	_ "github.com/onsi/ginkgo/v2/ginkgo"
	_ "k8s.io/kubernetes/cmd/kubelet"
	_ "k8s.io/kubernetes/test/e2e_node"
	_ "k8s.io/kubernetes/test/images/agnhost"
)
