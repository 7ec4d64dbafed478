// Package agent wires the node agent together: configuration in, then the
// runtime client, the QoS cgroup tree, the pod network, the runtime cache,
// the pod manager with its workers, the manifest source and the local API,
// each in its own package. Run starts them and stops them; stopping the
// agent never stops pods.
package agent
