package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"

	"nodeagent/cri"
	"nodeagent/internal/cli"
	"nodeagent/internal/crilog"
	"nodeagent/manifest"
)

// pickContainer resolves -c, or the pod's only container.
func pickContainer(p *corev1.Pod, name string) (corev1.ContainerStatus, error) {
	all := append(append([]corev1.ContainerStatus{}, p.Status.ContainerStatuses...), p.Status.InitContainerStatuses...)
	if name == "" {
		if len(p.Spec.Containers) == 1 {
			name = p.Spec.Containers[0].Name
		} else {
			var names []string
			for _, c := range p.Spec.Containers {
				names = append(names, c.Name)
			}
			return corev1.ContainerStatus{}, fmt.Errorf("a container name must be specified for pod %s, choose one of: [%s]", p.Name, strings.Join(names, " "))
		}
	}
	for _, cs := range all {
		if cs.Name == name {
			return cs, nil
		}
	}
	return corev1.ContainerStatus{}, fmt.Errorf("container %s is not valid for pod %s", name, p.Name)
}

type logOptions struct {
	container  string
	follow     bool
	previous   bool
	tail       int
	timestamps bool
}

// logs prints a container's log from the CRI log file the runtime writes
// under the agent's podLogsDir.
func (c *client) logs(name string, o logOptions) error {
	p, err := c.findPod(name)
	if err != nil {
		return err
	}
	cs, err := pickContainer(p, o.container)
	if err != nil {
		return err
	}
	cfg, err := c.trustedConfig()
	if err != nil {
		return err
	}
	n := cs.RestartCount
	if o.previous {
		if cs.LastTerminationState.Terminated == nil || n == 0 {
			return fmt.Errorf("previous terminated container %q in pod %q not found", cs.Name, p.Name)
		}
		n--
	} else if cs.ContainerID == "" {
		return fmt.Errorf("container %q in pod %q is waiting to start: %s", cs.Name, p.Name, waitingReason(cs))
	}
	// The names come from the read-only API: each must be one valid path
	// element before it is joined under the agent's podLogsDir.
	if err := checkPathNames(p, cs.Name); err != nil {
		return err
	}
	file := filepath.Join(cfg.PodLogsDir, fmt.Sprintf("%s_%s_%s", p.Namespace, p.Name, p.UID), cs.Name, strconv.Itoa(int(n))+".log")
	f, err := os.OpenFile(file, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return fmt.Errorf("read logs: %w", err)
	}
	defer f.Close()

	// The tail is streamed, never held: a container controls how much it
	// logs, and how long a line it writes.
	from, err := crilog.TailOffset(f, o.tail)
	if err != nil {
		return fmt.Errorf("read logs: %w", err)
	}
	if _, err := f.Seek(from, io.SeekStart); err != nil {
		return fmt.Errorf("read logs: %w", err)
	}
	rd := crilog.NewReader(f)
	for {
		rec, err := rd.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		c.printRecord(rec, o.timestamps)
	}
	if !o.follow || o.previous {
		return nil
	}
	// Follow: keep reading as the container writes, until it stops.
	rd = crilog.NewReader(f)
	for {
		rec, err := rd.Next()
		if err == nil {
			c.printRecord(rec, o.timestamps)
			continue
		}
		if !errors.Is(err, io.EOF) {
			return err
		}
		if !c.stillRunning(p.Name, cs.Name, cs.ContainerID) {
			return nil
		}
		time.Sleep(200 * time.Millisecond)
		rd = crilog.NewReader(f)
	}
}

// printRecord writes one record; the pieces of a line longer than
// crilog.MaxRecordBytes are written as one line, stamped once.
func (c *client) printRecord(r crilog.Record, timestamps bool) {
	if timestamps && !c.midLine {
		fmt.Fprintf(c.out, "%s ", r.Time.Format(time.RFC3339Nano))
	}
	c.out.Write(r.Content)
	c.midLine = r.Continued
	if !r.Continued {
		c.out.Write([]byte{'\n'})
	}
}

func (c *client) stillRunning(pod, container, id string) bool {
	p, err := c.findPod(pod)
	if err != nil {
		return false
	}
	cs, err := pickContainer(p, container)
	return err == nil && cs.ContainerID == id && cs.State.Running != nil
}

// checkPathNames refuses pod and container names that are not the API
// server's: they name directories nodectl reads as root.
func checkPathNames(p *corev1.Pod, container string) error {
	if errs := manifest.CheckNames(p.Namespace, p.Name, p.UID, container); len(errs) > 0 {
		return fmt.Errorf("the agent's API lists pod %q with names nodectl will not use as paths: %v", p.Name, errs.ToAggregate())
	}
	return nil
}

func waitingReason(cs corev1.ContainerStatus) string {
	if w := cs.State.Waiting; w != nil {
		return w.Reason
	}
	return "unknown"
}

// execTarget resolves the running container a command should run in and
// connects to the agent's runtime. The caller closes the client.
func (c *client) execTarget(name, container string, cmd []string) (*cri.Client, string, error) {
	if len(cmd) == 0 {
		return nil, "", cli.UsageError("exec needs a command after --")
	}
	p, err := c.findPod(name)
	if err != nil {
		return nil, "", err
	}
	cs, err := pickContainer(p, container)
	if err != nil {
		return nil, "", err
	}
	if cs.State.Running == nil {
		return nil, "", fmt.Errorf("cannot exec in container %q of pod %q: it is not running", cs.Name, p.Name)
	}
	cfg, err := c.trustedConfig()
	if err != nil {
		return nil, "", err
	}
	rt, err := cri.New(cfg.ContainerRuntimeEndpoint, cri.Options{})
	if err != nil {
		return nil, "", err
	}
	_, id, _ := strings.Cut(cs.ContainerID, "://")
	return rt, id, nil
}

// exec runs a command in a container through the runtime's ExecSync and
// returns the command's exit code.
func (c *client) exec(name, container string, cmd []string, timeout time.Duration) (int, error) {
	rt, id, err := c.execTarget(name, container, cmd)
	if err != nil {
		return 0, err
	}
	defer rt.Close()
	resp, err := rt.ExecSync(context.Background(), id, cmd, timeout)
	if err != nil {
		return 0, err
	}
	os.Stdout.Write(resp.Stdout)
	os.Stderr.Write(resp.Stderr)
	return int(resp.ExitCode), nil
}
