// Package probes runs liveness, readiness and startup probes and the
// postStart/preStop hook actions with the kubelet's semantics. All probes
// share one scheduler (Manager); results flow to the pod workers through
// Manager.Changed, Ready, Started and Kill. HTTP, TCP and gRPC probes run
// inside the agent; exec probes go through the runtime (CRI ExecSync) and
// are by far the most expensive kind.
package probes
