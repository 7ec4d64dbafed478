package cri

import (
	"context"
	"errors"
	"fmt"

	tasksapi "github.com/containerd/containerd/api/services/tasks/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
)

// containerdNamespace is where containerd's CRI plugin keeps its
// containers.
const containerdNamespace = "k8s.io"

// ErrNotContainerd is DeleteTask's answer for another runtime.
var ErrNotContainerd = errors.New("the runtime is not containerd")

// DeleteTask deletes a container's task through containerd's own task
// API, on the socket that serves the CRI, after killing what runs of it.
// It mends what the CRI cannot: a StartContainer cut off while containerd
// created the task (the agent killed, its request cancelled) leaves the
// container EXITED with reason StartError and its task in place, and
// RemoveContainer then fails for good with "cannot delete running task"
// (containerd 1.6 to 2.x create the task and only clean it up once they
// hold it). A container without a task is success. Other runtimes:
// ErrNotContainerd.
func (c *Client) DeleteTask(ctx context.Context, id string) error {
	ctx, cancel := c.call(ctx)
	defer cancel()
	v, err := c.Version(ctx)
	if err != nil {
		return err
	}
	if v.RuntimeName != "containerd" {
		return ErrNotContainerd
	}
	ctx = metadata.AppendToOutgoingContext(ctx, "containerd-namespace", containerdNamespace)
	tasks := tasksapi.NewTasksClient(c.conn)
	if _, err := tasks.Kill(ctx, &tasksapi.KillRequest{ContainerID: id, Signal: 9, All: true}); err != nil {
		if e := c.classify("Kill", err); IsNotFound(e) {
			return nil
		} else if !isCode(e, codes.FailedPrecondition) { // already stopped
			return fmt.Errorf("containerd task of %s: %w", id, e)
		}
	}
	// Deleted once the shim has reaped the killed process.
	if _, err := tasks.Wait(ctx, &tasksapi.WaitRequest{ContainerID: id}); err != nil {
		if e := c.classify("Wait", err); !IsNotFound(e) {
			return fmt.Errorf("containerd task of %s: %w", id, e)
		}
	}
	if _, err := tasks.Delete(ctx, &tasksapi.DeleteTaskRequest{ContainerID: id}); err != nil {
		if e := c.classify("Delete", err); !IsNotFound(e) {
			return fmt.Errorf("containerd task of %s: %w", id, e)
		}
	}
	return nil
}

func isCode(err error, code codes.Code) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == code
}
