// Package cgroups builds and keeps correct the node's QoS cgroup tree exactly
// as the kubelet lays it out:
//
//	<cgroupRoot>/kubepods                 node allocatable limits; Guaranteed pods live here
//	<cgroupRoot>/kubepods/burstable       cpu.shares = Σ Burstable cpu requests (min 2)
//	<cgroupRoot>/kubepods/besteffort      cpu.shares = 2
//	<qos parent>/pod<UID>                 pod-level values from the pod spec
//
// The values come from pure functions (values.go) that unit tests pin to the
// kubelet's integer arithmetic. A Manager writes them for one hierarchy
// version (v1 or v2, chosen once with cgroups.Mode()); Tree applies them to
// the whole layout and is safe for concurrent use.
package cgroups
