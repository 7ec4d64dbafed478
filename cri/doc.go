// Package cri is the agent's client of the container runtime (CRI v1 over
// gRPC): runtime and image services, a deadline on every call, gRPC errors
// classified once (ErrNotFound, UnreachableError) so callers never match on
// strings. Stop and remove calls treat NotFound as success, so they are
// idempotent. Everything the agent creates carries the labels in labels.go,
// so the agent can rebuild its view of the node from the runtime alone.
//
// A Client is safe for concurrent use.
package cri
