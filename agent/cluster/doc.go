// Package cluster is the node's connection to a Kubernetes control plane
// (API-server mode, --kubeconfig): it joins with back-off (TLS bootstrap
// first when configured), hands out the clients with their own rate
// limits, and runs the Node's registration and status loop (node.APISync)
// and the node lease. Pod statuses (status.APISync), mirror pods
// (mirror), referenced objects (objects) and events (events.APISink) are
// their own packages and wait for Client. Without a kubeconfig none of
// this runs and the agent is standalone.
package cluster
