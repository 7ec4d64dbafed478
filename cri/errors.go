package cri

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ErrNotFound matches (errors.Is) a runtime error for a missing sandbox,
// container or image.
var ErrNotFound = errors.New("not found")

// ErrUnreachable matches (errors.Is) every UnreachableError.
var ErrUnreachable = errors.New("container runtime not reachable")

// UnreachableError says the runtime's socket could not be reached.
type UnreachableError struct {
	Endpoint string
	Err      error // the transport's own error
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("container runtime not reachable at %s: is containerd running?", e.Endpoint)
}

// Unwrap exposes the transport error.
func (e *UnreachableError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrUnreachable) true.
func (e *UnreachableError) Is(target error) bool { return target == ErrUnreachable }

// Error is a call the runtime answered with an error.
type Error struct {
	Op   string     // CRI method, e.g. "StopContainer"
	Code codes.Code // gRPC status code
	Msg  string     // the runtime's message
}

func (e *Error) Error() string { return fmt.Sprintf("%s: %s", e.Op, e.Msg) }

// Is makes errors.Is(err, ErrNotFound) true for NotFound answers, and
// errors.Is(err, context.DeadlineExceeded) for calls that ran out of time.
func (e *Error) Is(target error) bool {
	switch target {
	case ErrNotFound:
		return e.Code == codes.NotFound
	case context.DeadlineExceeded:
		return e.Code == codes.DeadlineExceeded
	}
	return false
}

// IsUnimplemented reports whether the runtime lacks the called method.
func IsUnimplemented(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == codes.Unimplemented
}

// IsNotFound reports whether err says the object does not exist.
func IsNotFound(err error) bool { return errors.Is(err, ErrNotFound) }

// classify turns a gRPC error into Error or UnreachableError.
func (c *Client) classify(op string, err error) error {
	if err == nil {
		return nil
	}
	st, ok := status.FromError(err)
	if !ok {
		return fmt.Errorf("%s: %w", op, err)
	}
	if st.Code() == codes.Unavailable {
		return &UnreachableError{Endpoint: c.endpoint, Err: err}
	}
	return &Error{Op: op, Code: st.Code(), Msg: st.Message()}
}

// ignoreNotFound makes stop/remove idempotent.
func ignoreNotFound(err error) error {
	if IsNotFound(err) {
		return nil
	}
	return err
}
