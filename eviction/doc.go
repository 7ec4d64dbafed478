// Package eviction evicts pods under memory, disk and PID pressure with the
// kubelet's signals, thresholds and ranking, before the kernel OOM killer
// has to act. Observations come from the host (memory cgroups, statfs,
// the kernel's task count); Manager turns them into pressure conditions,
// admission decisions and evictions, and keeps a trace of every decision.
// It polls every second, and on cgroup v1 memcg usage thresholds
// (cgroup.event_control + eventfd) wake it the moment usage crosses a line.
package eviction
