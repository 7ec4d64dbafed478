package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/proxy"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"nodeagent/cri"
	"nodeagent/internal/crilog"
)

// Streaming is what the kubelet server asks of the runtime.
type Streaming interface {
	Exec(ctx context.Context, containerID string, cmd []string, s cri.Streams) (string, error)
	Attach(ctx context.Context, containerID string, s cri.Streams) (string, error)
	PortForward(ctx context.Context, sandboxID string, ports []int32) (string, error)
	ExecSync(ctx context.Context, containerID string, cmd []string, timeout time.Duration) (*runtimeapi.ExecSyncResponse, error)
	ContainerStatus(ctx context.Context, containerID string) (*runtimeapi.ContainerStatus, error)
}

// KubeletSources are what the kubelet server serves: the read-only API's
// endpoints, unredacted, and the ones that reach into pods.
type KubeletSources struct {
	Sources
	// Pod finds a pod the node runs by namespace and name.
	Pod func(namespace, name string) (*corev1.Pod, bool)
	// Sandbox is the ID of the pod's running sandbox ("" when none).
	Sandbox func(uid types.UID) string
	Runtime Streaming
	Log     *slog.Logger
}

// MaxRequestBody bounds what the kubelet server reads of a request body:
// no endpoint takes one (streams are upgraded connections).
const MaxRequestBody = 64 << 10

// KubeletHandler returns the handler of the kubelet server: /healthz,
// /pods, /configz, /stats/summary, the /metrics family,
// /containerLogs/{ns}/{pod}/{container}, and /exec, /attach, /portForward
// and /run, which are proxied to the runtime's streaming server. Guard
// puts authentication and authorization in front of it.
func KubeletHandler(src KubeletSources) http.Handler {
	mux := http.NewServeMux()
	routes(mux, src.Sources, func(p corev1.Pod) corev1.Pod { return p })
	k := &kubeletServer{src}
	mux.HandleFunc("GET /containerLogs/{namespace}/{pod}/{container}", k.containerLogs)
	for _, m := range []string{"GET", "POST"} {
		for _, path := range []string{"/exec/{namespace}/{pod}/{container}", "/exec/{namespace}/{pod}/{uid}/{container}"} {
			mux.HandleFunc(m+" "+path, k.exec)
		}
		for _, path := range []string{"/attach/{namespace}/{pod}/{container}", "/attach/{namespace}/{pod}/{uid}/{container}"} {
			mux.HandleFunc(m+" "+path, k.attach)
		}
		for _, path := range []string{"/portForward/{namespace}/{pod}", "/portForward/{namespace}/{pod}/{uid}"} {
			mux.HandleFunc(m+" "+path, k.portForward)
		}
	}
	for _, path := range []string{"/run/{namespace}/{pod}/{container}", "/run/{namespace}/{pod}/{uid}/{container}"} {
		mux.HandleFunc("POST "+path, k.run)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Only a body that is there gets the limit: a wrapped empty body
		// would be forwarded with an upgrade as a chunked one, and its
		// terminator would corrupt the stream that follows.
		if r.Body != http.NoBody {
			r.Body = http.MaxBytesReader(w, r.Body, MaxRequestBody)
		}
		mux.ServeHTTP(w, r)
	})
}

type kubeletServer struct{ src KubeletSources }

// httpError is an answer with a status code.
type httpError struct {
	code int
	msg  string
}

func (e *httpError) Error() string { return e.msg }

func fail(code int, format string, args ...any) error {
	return &httpError{code, fmt.Sprintf(format, args...)}
}

func writeError(w http.ResponseWriter, err error) {
	code := http.StatusInternalServerError
	var he *httpError
	if errors.As(err, &he) {
		code = he.code
	}
	http.Error(w, err.Error(), code)
}

// pod is the request's pod, checked against the UID in the path if any.
func (k *kubeletServer) pod(r *http.Request) (*corev1.Pod, error) {
	ns, name := r.PathValue("namespace"), r.PathValue("pod")
	p, ok := k.src.Pod(ns, name)
	if !ok {
		return nil, fail(http.StatusNotFound, "pod %q does not exist", name)
	}
	if uid := r.PathValue("uid"); uid != "" && types.UID(uid) != p.UID {
		return nil, fail(http.StatusNotFound, "pod %q with UID %q does not exist (the node runs UID %q)", name, uid, p.UID)
	}
	return p, nil
}

// containerStatus finds a container of the pod by name: app, init or
// ephemeral.
func containerStatus(p *corev1.Pod, name string) (corev1.ContainerStatus, bool) {
	for _, list := range [][]corev1.ContainerStatus{p.Status.ContainerStatuses, p.Status.InitContainerStatuses, p.Status.EphemeralContainerStatuses} {
		for _, cs := range list {
			if cs.Name == name {
				return cs, true
			}
		}
	}
	return corev1.ContainerStatus{}, false
}

func hasContainer(p *corev1.Pod, name string) bool {
	for _, c := range p.Spec.Containers {
		if c.Name == name {
			return true
		}
	}
	for _, c := range p.Spec.InitContainers {
		if c.Name == name {
			return true
		}
	}
	for _, c := range p.Spec.EphemeralContainers {
		if c.Name == name {
			return true
		}
	}
	return false
}

// runningContainer is the runtime ID of the pod's running container name.
func runningContainer(p *corev1.Pod, name string) (string, error) {
	if !hasContainer(p, name) {
		return "", fail(http.StatusNotFound, "container %q not found in pod %q", name, p.Name)
	}
	cs, ok := containerStatus(p, name)
	if !ok || cs.State.Running == nil || cs.ContainerID == "" {
		return "", fail(http.StatusBadRequest, "container %q in pod %q is not running", name, p.Name)
	}
	return runtimeID(cs.ContainerID), nil
}

// runtimeID strips the runtime's scheme: containerd://<id> → <id>.
func runtimeID(containerID string) string {
	if _, id, ok := strings.Cut(containerID, "://"); ok {
		return id
	}
	return containerID
}

// streams reads the stream flags of an exec or attach request, as the
// kubelet does: 1 means on; with a TTY there is no separate stderr.
func streams(r *http.Request) (cri.Streams, error) {
	q := r.URL.Query()
	s := cri.Streams{Stdin: q.Get("input") == "1", Stdout: q.Get("output") == "1", Stderr: q.Get("error") == "1", TTY: q.Get("tty") == "1"}
	if s.TTY {
		s.Stderr = false
	}
	if !s.Stdin && !s.Stdout && !s.Stderr {
		return s, fail(http.StatusBadRequest, "you must specify at least 1 of stdin, stdout, stderr")
	}
	return s, nil
}

func (k *kubeletServer) exec(w http.ResponseWriter, r *http.Request) {
	cmd := r.URL.Query()["command"]
	k.containerStream(w, r, func(id string, s cri.Streams) (string, error) {
		if len(cmd) == 0 {
			return "", fail(http.StatusBadRequest, "command: at least one is required")
		}
		return k.src.Runtime.Exec(r.Context(), id, cmd, s)
	})
}

func (k *kubeletServer) attach(w http.ResponseWriter, r *http.Request) {
	k.containerStream(w, r, func(id string, s cri.Streams) (string, error) {
		return k.src.Runtime.Attach(r.Context(), id, s)
	})
}

// containerStream is a stream into a running container: open asks the
// runtime for it with the container's ID and the streams asked for.
func (k *kubeletServer) containerStream(w http.ResponseWriter, r *http.Request, open func(id string, s cri.Streams) (string, error)) {
	k.stream(w, r, func(p *corev1.Pod) (string, error) {
		s, err := streams(r)
		if err != nil {
			return "", err
		}
		id, err := runningContainer(p, r.PathValue("container"))
		if err != nil {
			return "", err
		}
		return open(id, s)
	})
}

func (k *kubeletServer) portForward(w http.ResponseWriter, r *http.Request) {
	k.stream(w, r, func(p *corev1.Pod) (string, error) {
		// Websocket clients name the ports in the query; SPDY clients in
		// each stream's headers, which the runtime reads.
		var ports []int32
		for _, v := range r.URL.Query()["port"] {
			n, err := strconv.ParseUint(v, 10, 16)
			if err != nil || n == 0 {
				return "", fail(http.StatusBadRequest, "port %q: want a port number from 1 to 65535", v)
			}
			ports = append(ports, int32(n))
		}
		id := k.src.Sandbox(p.UID)
		if id == "" {
			return "", fail(http.StatusBadRequest, "pod %q has no running sandbox", p.Name)
		}
		return k.src.Runtime.PortForward(r.Context(), id, ports)
	})
}

// stream resolves a streaming request to the runtime's URL for it and
// proxies the upgraded connection there. The connection lives as long as
// the session: the server's read and write deadlines are lifted for it.
func (k *kubeletServer) stream(w http.ResponseWriter, r *http.Request, prepare func(*corev1.Pod) (string, error)) {
	p, err := k.pod(r)
	if err != nil {
		writeError(w, err)
		return
	}
	raw, err := prepare(p)
	if err != nil {
		var he *httpError
		if !errors.As(err, &he) {
			k.src.Log.Warn("streaming request failed", "path", r.URL.Path, "err", err)
		}
		writeError(w, err)
		return
	}
	u, err := url.Parse(raw)
	if err != nil {
		writeError(w, fmt.Errorf("runtime streaming URL %q: %w", raw, err))
		return
	}
	rc := http.NewResponseController(w)
	rc.SetReadDeadline(time.Time{})
	rc.SetWriteDeadline(time.Time{})
	h := proxy.NewUpgradeAwareHandler(u, nil, false, true, proxyResponder{k.src.Log})
	h.ServeHTTP(w, r)
}

type proxyResponder struct{ log *slog.Logger }

func (p proxyResponder) Error(w http.ResponseWriter, r *http.Request, err error) {
	p.log.Warn("streaming proxy", "path", r.URL.Path, "err", err)
	http.Error(w, err.Error(), http.StatusInternalServerError)
}

// run runs a command to completion and answers with its output (stdout,
// then stderr), as the kubelet's /run does.
func (k *kubeletServer) run(w http.ResponseWriter, r *http.Request) {
	p, err := k.pod(r)
	if err != nil {
		writeError(w, err)
		return
	}
	cmd := strings.Fields(r.URL.Query().Get("cmd"))
	if len(cmd) == 0 {
		writeError(w, fail(http.StatusBadRequest, "cmd: a command is required"))
		return
	}
	id, err := runningContainer(p, r.PathValue("container"))
	if err != nil {
		writeError(w, err)
		return
	}
	resp, err := k.src.Runtime.ExecSync(r.Context(), id, cmd, 0)
	if err != nil {
		writeError(w, err)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Write(resp.Stdout)
	w.Write(resp.Stderr)
}

// logOptions parses containerLogs' query: the kubelet's PodLogOptions,
// with an error naming the parameter for a value that does not parse or
// is out of the API server's range.
func logOptions(q url.Values) (o crilog.StreamOptions, previous bool, err error) {
	flag := func(name string) bool {
		v := strings.ToLower(q.Get(name))
		return v != "" && v != "0" && v != "false"
	}
	o.Follow, previous, o.Timestamps = flag("follow"), flag("previous"), flag("timestamps")
	o.Tail = -1
	tail := q.Get("tailLines")
	if t := q.Get("tail"); t != "" { // the kubelet's older name; "all" is no limit
		tail = t
		if t == "all" {
			tail = ""
		}
	}
	if tail != "" {
		n, err := strconv.ParseInt(tail, 10, 64)
		if err != nil || n < 0 {
			return o, false, fail(http.StatusBadRequest, "tailLines: invalid value %q: must be an integer >= 0", tail)
		}
		o.Tail = int(min(n, 1<<31))
	}
	if v := q.Get("limitBytes"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			return o, false, fail(http.StatusBadRequest, "limitBytes: invalid value %q: must be an integer > 0", v)
		}
		o.LimitBytes = n
	}
	secs, since := q.Get("sinceSeconds"), q.Get("sinceTime")
	if secs != "" && since != "" {
		return o, false, fail(http.StatusBadRequest, "at most one of sinceTime or sinceSeconds may be specified")
	}
	if secs != "" {
		n, err := strconv.ParseInt(secs, 10, 64)
		if err != nil || n < 1 {
			return o, false, fail(http.StatusBadRequest, "sinceSeconds: invalid value %q: must be an integer > 0", secs)
		}
		o.Since = time.Now().Add(-time.Duration(min(n, int64(1<<33))) * time.Second)
	}
	if since != "" {
		t, err := time.Parse(time.RFC3339, since)
		if err != nil {
			return o, false, fail(http.StatusBadRequest, "sinceTime: invalid value %q: want an RFC 3339 time such as 2026-11-24T10:00:00Z", since)
		}
		o.Since = t
	}
	return o, previous, nil
}

// logContainer is the runtime ID of the container whose log is asked
// for, with the kubelet's choice and wording: the previous instance, the
// running one, or the last one that ran.
func logContainer(p *corev1.Pod, name string, previous bool) (string, error) {
	if !hasContainer(p, name) {
		return "", fail(http.StatusNotFound, "container %q not found in pod %q", name, p.Name)
	}
	cs, _ := containerStatus(p, name)
	last := cs.LastTerminationState.Terminated
	switch st := cs.State; {
	case previous:
		if last == nil || last.ContainerID == "" {
			return "", fail(http.StatusBadRequest, "previous terminated container %q in pod %q not found", name, p.Name)
		}
		return runtimeID(last.ContainerID), nil
	case st.Running != nil && cs.ContainerID != "":
		return runtimeID(cs.ContainerID), nil
	case st.Terminated != nil:
		switch {
		case st.Terminated.ContainerID != "":
			return runtimeID(st.Terminated.ContainerID), nil
		case last != nil && last.ContainerID != "":
			return runtimeID(last.ContainerID), nil
		}
		return "", fail(http.StatusBadRequest, "container %q in pod %q is terminated", name, p.Name)
	case last != nil && last.ContainerID != "":
		return runtimeID(last.ContainerID), nil
	case st.Waiting != nil:
		return "", fail(http.StatusBadRequest, "container %q in pod %q is waiting to start: %s", name, p.Name, st.Waiting.Reason)
	}
	return "", fail(http.StatusBadRequest, "container %q in pod %q is waiting to start - no logs yet", name, p.Name)
}

func (k *kubeletServer) containerLogs(w http.ResponseWriter, r *http.Request) {
	o, previous, err := logOptions(r.URL.Query())
	if err != nil {
		writeError(w, err)
		return
	}
	p, err := k.pod(r)
	if err != nil {
		writeError(w, err)
		return
	}
	id, err := logContainer(p, r.PathValue("container"), previous)
	if err != nil {
		writeError(w, err)
		return
	}
	st, err := k.src.Runtime.ContainerStatus(r.Context(), id)
	if err != nil {
		writeError(w, fmt.Errorf("container %q in pod %q: %w", r.PathValue("container"), p.Name, err))
		return
	}
	if st.LogPath == "" {
		writeError(w, fail(http.StatusBadRequest, "container %q in pod %q has no log file", r.PathValue("container"), p.Name))
		return
	}
	o.Running = func() bool {
		st, err := k.src.Runtime.ContainerStatus(r.Context(), id)
		return err == nil && st.State == runtimeapi.ContainerState_CONTAINER_RUNNING
	}
	if o.Follow {
		http.NewResponseController(w).SetWriteDeadline(time.Time{})
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	out := &flushWriter{w: w, rc: http.NewResponseController(w)}
	if err := crilog.Stream(r.Context(), st.LogPath, o, out); err != nil && !out.wrote {
		writeError(w, fmt.Errorf("container %q in pod %q: read log: %w", r.PathValue("container"), p.Name, err))
	}
}

// flushWriter sends every write to the client at once: a follower sees
// lines as they come.
type flushWriter struct {
	w     http.ResponseWriter
	rc    *http.ResponseController
	wrote bool
}

func (f *flushWriter) Write(p []byte) (int, error) {
	f.wrote = true
	n, err := f.w.Write(p)
	if err == nil {
		err = f.rc.Flush()
	}
	return n, err
}
