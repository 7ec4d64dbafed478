// Package eviction evicts pods under memory, disk and PID pressure with the
// kubelet's signals, thresholds and ranking, before the kernel OOM killer
// has to act. Observations come from the host (memory cgroups, statfs,
// the kernel's task count); Manager turns them into pressure conditions,
// admission decisions and evictions, and keeps a trace of every decision.
// It polls every second; kernel notifications (memcg thresholds, PSI,
// memory.events) call Manager.Notify to act at once.
package eviction
