// Package cluster is what the agent does as a node of a Kubernetes
// cluster (API-server mode, --kubeconfig): it registers the Node and keeps
// its status, holds the node lease, writes pod statuses back, keeps a
// mirror pod for each static pod, and sends events. The pods bound to the
// node come in through source.API. Without a kubeconfig none of this
// runs and the agent is standalone.
package cluster
