// Package pods runs pods: the Manager owns the desired set (from the
// sources), admits or rejects pods, and gives every admitted pod its own
// worker goroutine; a worker is the only place that drives its pod's
// lifecycle, so a slow or failing pod never blocks another.
//
// A worker's life:
//
//	     admitted
//	        │
//	        ▼
//	┌──── syncing ◄───── wake: runtime change (pleg), back-off expiry, resync
//	│  pod cgroup, sandbox, init containers in order, containers,
//	│  restarts with back-off; status to the store after every pass
//	│       │
//	│       │ removed from the source (or an orphan found in the runtime)
//	│       ▼
//	│  terminating: stop containers in parallel with the grace period,
//	│  stop and remove the sandbox, remove the pod cgroup, logs, volumes
//	│       │
//	│       ▼
//	│     done (status dropped)
//	│
//	└─► agent shutting down: the worker returns and leaves the pod running;
//	    the next agent re-adopts it from the runtime's labels.
package pods
