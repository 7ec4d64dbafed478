// Package probes will run liveness, readiness and startup probes and the
// postStart/preStop hooks on one shared scheduler. Not implemented yet.
package probes
