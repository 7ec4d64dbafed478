// Package qos holds the kubelet's per-pod resource arithmetic: the QoS class
// of a pod, its summed requests and limits (with init-container and sidecar
// semantics), and the oom_score_adj policy by QoS. Every function is pure and
// safe for concurrent use.
package qos
