// Package eviction will evict pods by QoS under memory and disk pressure,
// event-driven (memcg thresholds, PSI, memory.events) with polling as a
// safety net, before the kernel OOM killer has to act. Not implemented yet.
package eviction
