package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	internalapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/cri-client/pkg/logs"

	"nodeagent/cri"
	"nodeagent/internal/cli"
	"nodeagent/internal/layout"
	"nodeagent/manifest"
)

// defaultContainerAnnotation names the container kubectl picks when none
// is given.
const defaultContainerAnnotation = "kubectl.kubernetes.io/default-container"

// pickContainer resolves -c; without it, the pod's default container
// (its annotation, else the first) as kubectl picks it, saying so on
// stderr when there was a choice.
func pickContainer(p *corev1.Pod, name string, notice io.Writer) (corev1.ContainerStatus, error) {
	all := append(append([]corev1.ContainerStatus{}, p.Status.ContainerStatuses...), p.Status.InitContainerStatuses...)
	if name == "" && len(p.Spec.Containers) > 0 {
		name = p.Spec.Containers[0].Name
		if def := p.Annotations[defaultContainerAnnotation]; def != "" {
			name = def
		} else if len(p.Spec.Containers)+len(p.Spec.InitContainers) > 1 && notice != nil {
			fmt.Fprintf(notice, "Defaulted container %q out of: %s\n", name, strings.Join(containerNames(p), ", "))
		}
	}
	for _, cs := range all {
		if cs.Name == name {
			return cs, nil
		}
	}
	return corev1.ContainerStatus{}, fmt.Errorf("container %s is not valid for pod %s", name, p.Name)
}

// containerNames lists the pod's containers as kubectl does: the app
// containers, then the init ones marked "(init)".
func containerNames(p *corev1.Pod) []string {
	var names []string
	for _, c := range p.Spec.Containers {
		names = append(names, c.Name)
	}
	for _, c := range p.Spec.InitContainers {
		names = append(names, c.Name+" (init)")
	}
	return names
}

type logOptions struct {
	container     string
	allContainers bool
	prefix        bool
	follow        bool
	previous      bool
	tail          int64 // < 0: all
	timestamps    bool
	since         time.Duration
	sinceTime     string // RFC 3339
	limitBytes    int64  // 0: no limit
}

// podLogOptions are the options as the kubelet's reader takes them; bad
// values are refused before anything is read.
func (o logOptions) podLogOptions() (*corev1.PodLogOptions, error) {
	// A previous run has ended: there is nothing to follow (and the reader
	// would ask the runtime about a container it has no ID for).
	api := &corev1.PodLogOptions{Follow: o.follow && !o.previous, Previous: o.previous, Timestamps: o.timestamps}
	if o.tail >= 0 {
		api.TailLines = &o.tail
	}
	switch {
	case o.since != 0 && o.sinceTime != "":
		return nil, cli.UsageError("--since and --since-time cannot be given together")
	case o.since < 0:
		return nil, cli.UsageError(fmt.Sprintf("--since %s: must be a positive duration", o.since))
	case o.since > 0:
		secs := int64((o.since + time.Second - 1) / time.Second)
		api.SinceSeconds = &secs
	case o.sinceTime != "":
		t, err := time.Parse(time.RFC3339, o.sinceTime)
		if err != nil {
			return nil, cli.UsageError(fmt.Sprintf("--since-time %q: want an RFC 3339 time such as 2026-11-24T10:00:00Z", o.sinceTime))
		}
		api.SinceTime = &metav1.Time{Time: t}
	}
	if o.limitBytes < 0 {
		return nil, cli.UsageError(fmt.Sprintf("--limit-bytes %d: must be greater than 0", o.limitBytes))
	}
	if o.limitBytes > 0 {
		api.LimitBytes = &o.limitBytes
	}
	return api, nil
}

// logTarget is one container log to print.
type logTarget struct {
	name, file, id string
}

// logs prints container logs from the CRI log files the runtime writes
// under the agent's podLogsDir, through the kubelet's own reader
// (k8s.io/cri-client/pkg/logs): --follow goes on across rotation as the
// kubelet's does, and --since, --since-time, --limit-bytes, --tail and
// --timestamps mean what they mean for kubectl.
func (c *client) logs(name string, o logOptions) error {
	api, err := o.podLogOptions()
	if err != nil {
		return err
	}
	p, err := c.trustedPod(name)
	if err != nil {
		return err
	}
	var statuses []corev1.ContainerStatus
	if o.allContainers {
		if o.container != "" {
			return cli.UsageError("--all-containers and -c cannot be given together")
		}
		// kubectl's order: init containers, then the app containers.
		statuses = append(append(statuses, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...)
	} else {
		cs, err := pickContainer(p, o.container, c.errOut)
		if err != nil {
			return err
		}
		statuses = append(statuses, cs)
	}
	cfg, err := c.trustedConfig()
	if err != nil {
		return err
	}
	var targets []logTarget
	for _, cs := range statuses {
		t, err := logFile(p, cs, cfg.PodLogsDir, o.previous)
		if err != nil {
			if o.allContainers {
				continue // kubectl skips what has no log yet
			}
			return err
		}
		targets = append(targets, t)
	}
	var rt internalapi.RuntimeService
	if api.Follow {
		conn, err := cri.New(cfg.ContainerRuntimeEndpoint, cri.Options{})
		if err != nil {
			return err
		}
		defer conn.Close()
		rt = statusOnly{conn: conn}
	}
	var mu sync.Mutex
	read := func(t logTarget) error {
		out := io.Writer(c.out)
		if len(targets) > 1 || o.prefix {
			lw := &lineWriter{mu: &mu, out: c.out}
			if o.prefix {
				lw.prefix = fmt.Sprintf("[pod/%s/%s] ", p.Name, t.name)
			}
			defer lw.flush()
			out = lw
		}
		id := ""
		if rt != nil {
			id = t.id
		}
		if err := logs.ReadLogs(context.Background(), t.file, id, readOptions(api, time.Now()), rt, out, out); err != nil {
			return fmt.Errorf("read logs of container %s: %w", t.name, err)
		}
		return nil
	}
	if !o.follow || len(targets) == 1 {
		for _, t := range targets {
			if err := read(t); err != nil {
				return err
			}
		}
		return nil
	}
	// Following several containers: all at once, whole lines each.
	errs := make(chan error, len(targets))
	for _, t := range targets {
		go func() { errs <- read(t) }()
	}
	var all []error
	for range targets {
		all = append(all, <-errs)
	}
	return errors.Join(all...)
}

// logFile is the log file of a container's current run, or with previous
// its last one. The names come from the read-only API: each must be one
// valid path element before it is joined under the agent's podLogsDir,
// and the file must be a regular file, not a link someone placed there.
func logFile(p *corev1.Pod, cs corev1.ContainerStatus, logsDir string, previous bool) (logTarget, error) {
	n := cs.RestartCount
	if previous {
		if cs.LastTerminationState.Terminated == nil || n == 0 {
			return logTarget{}, fmt.Errorf("previous terminated container %q in pod %q not found", cs.Name, p.Name)
		}
		n--
	} else if cs.ContainerID == "" {
		return logTarget{}, fmt.Errorf("container %q in pod %q is waiting to start: %s", cs.Name, p.Name, waitingReason(cs))
	}
	if err := checkPathNames(p, cs.Name); err != nil {
		return logTarget{}, err
	}
	file := layout.Logs(logsDir).File(p.Namespace, p.Name, p.UID, cs.Name, int(n))
	st, err := os.Lstat(file)
	if err != nil {
		return logTarget{}, fmt.Errorf("read logs: %w", err)
	}
	if !st.Mode().IsRegular() {
		return logTarget{}, fmt.Errorf("read logs: %s is not a regular file", file)
	}
	_, id, _ := strings.Cut(cs.ContainerID, "://")
	return logTarget{name: cs.Name, file: file, id: id}, nil
}

// statusOnly is the one runtime call the kubelet's log reader makes while
// following: whether the container still runs.
type statusOnly struct {
	internalapi.RuntimeService
	conn *cri.Client
}

func (s statusOnly) ContainerStatus(ctx context.Context, id string, _ bool) (*runtimeapi.ContainerStatusResponse, error) {
	st, err := s.conn.ContainerStatus(ctx, id)
	if err != nil {
		return nil, err
	}
	return &runtimeapi.ContainerStatusResponse{Status: st}, nil
}

// lineWriter writes whole lines only, under a lock shared with the other
// containers' writers, each line with prefix. A container decides how long
// its lines are: past maxPendingLine bytes without a newline, what is held
// goes out as a line of its own.
type lineWriter struct {
	mu     *sync.Mutex
	out    io.Writer
	prefix string
	buf    []byte
}

const maxPendingLine = 64 << 10

func (w *lineWriter) Write(b []byte) (int, error) {
	w.buf = append(w.buf, b...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 && len(w.buf) < maxPendingLine {
			w.buf = slices.Clip(w.buf)
			return len(b), nil
		}
		end := i + 1
		if i < 0 || i >= maxPendingLine {
			end = maxPendingLine
		}
		line := w.buf[:end]
		if line[len(line)-1] != '\n' {
			line = append(slices.Clip(line), '\n')
		}
		if err := w.emit(line); err != nil {
			return 0, err
		}
		w.buf = w.buf[end:]
	}
}

// flush writes a last line the container never ended.
func (w *lineWriter) flush() {
	if len(w.buf) > 0 {
		w.emit(append(w.buf, '\n'))
		w.buf = nil
	}
}

func (w *lineWriter) emit(line []byte) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, err := io.WriteString(w.out, w.prefix+string(line))
	return err
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
	p, err := c.trustedPod(name)
	if err != nil {
		return nil, "", err
	}
	cs, err := pickContainer(p, container, c.errOut)
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

// readOptions are the CRI log reader's options for the API's: since is the
// later of sinceSeconds and sinceTime, as the kubelet reads it.
func readOptions(api *corev1.PodLogOptions, now time.Time) *logs.LogOptions {
	opts := &logs.LogOptions{TailLines: api.TailLines, LimitBytes: api.LimitBytes, Follow: api.Follow, Timestamp: api.Timestamps}
	if api.SinceSeconds != nil {
		opts.Since = now.Add(-time.Duration(*api.SinceSeconds) * time.Second)
	}
	if api.SinceTime != nil && api.SinceTime.After(opts.Since) {
		opts.Since = api.SinceTime.Time
	}
	return opts
}
