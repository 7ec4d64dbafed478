// Package stats serves what the kubelet's stats provider serves: the
// Summary API (/stats/summary, in the upstream v1alpha1 types), the
// resource metrics metrics-server reads (/metrics/resource) and cadvisor's
// container metrics (/metrics/cadvisor). CPU, memory and process counts
// come from the node, pod and container cgroups through cadvisor's raw
// handler; writable layers and the image filesystem from the runtime;
// volumes and logs from their directories; networks from /proc.
package stats
