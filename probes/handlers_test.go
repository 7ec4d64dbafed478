package probes

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"nodeagent/cri"
)

func hostPort(t *testing.T, rawURL string) (string, int) {
	t.Helper()
	u := strings.TrimPrefix(strings.TrimPrefix(rawURL, "http://"), "https://")
	host, port, err := net.SplitHostPort(u)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(port)
	return host, n
}

func httpProbeSpec(port int, path string, headers ...corev1.HTTPHeader) *corev1.Probe {
	return &corev1.Probe{TimeoutSeconds: 1, ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
		Path: path, Port: intstr.FromInt32(int32(port)), HTTPHeaders: headers}}}
}

func TestHTTPProbe(t *testing.T) {
	var gotUA, gotAccept, gotCustom, gotHost string
	mux := http.NewServeMux()
	mux.HandleFunc("/ok", func(w http.ResponseWriter, r *http.Request) {
		gotUA, gotAccept, gotCustom, gotHost = r.UserAgent(), r.Header.Get("Accept"), r.Header.Get("X-Custom"), r.Host
		w.Write([]byte(strings.Repeat("x", 20<<10)))
	})
	mux.HandleFunc("/fail", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(500) })
	mux.HandleFunc("/local", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/ok", http.StatusFound) })
	mux.HandleFunc("/loop", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/loop", http.StatusFound) })
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(3 * time.Second):
		}
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	_, port := hostPort(t, srv.URL)
	mux.HandleFunc("/remote", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://localhost:"+strconv.Itoa(port)+"/fail", http.StatusFound)
	})
	h := NewHandlers(nil)
	target := Target{PodIP: "127.0.0.1"}
	run := func(p *corev1.Probe) outcome { return h.probe(context.Background(), p, target) }

	out := run(httpProbeSpec(port, "/ok", corev1.HTTPHeader{Name: "X-Custom", Value: "v"}, corev1.HTTPHeader{Name: "Host", Value: "example.test"}))
	if out.result != Success || len(out.output) != maxOutput {
		t.Errorf("/ok: %v, body %d bytes (want the 10 KiB cap)", out.result, len(out.output))
	}
	if gotUA != "kube-probe/1.37" || gotAccept != "*/*" || gotCustom != "v" || gotHost != "example.test" {
		t.Errorf("headers: UA %q Accept %q X-Custom %q Host %q", gotUA, gotAccept, gotCustom, gotHost)
	}
	run(httpProbeSpec(port, "/ok", corev1.HTTPHeader{Name: "Accept", Value: ""}, corev1.HTTPHeader{Name: "User-Agent", Value: "mine"}))
	if gotAccept != "" || gotUA != "mine" {
		t.Errorf("user headers must replace the defaults: Accept %q UA %q", gotAccept, gotUA)
	}
	if out := run(httpProbeSpec(port, "/fail")); out.result != Failure || out.message != "HTTP probe failed with statuscode: 500" {
		t.Errorf("/fail: %+v", out)
	}
	if out := run(httpProbeSpec(port, "/local")); out.result != Success || out.warning {
		t.Errorf("/local redirect: %+v", out)
	}
	if out := run(httpProbeSpec(port, "/remote")); out.result != Success || !out.warning {
		t.Errorf("/remote redirect must be a success with a warning, not followed: %+v", out)
	}
	if out := run(httpProbeSpec(port, "/loop")); out.result != Failure || !strings.Contains(out.message, "stopped after 10 redirects") {
		t.Errorf("/loop: %+v", out)
	}
	start := time.Now()
	if out := run(httpProbeSpec(port, "/slow")); out.result != Failure {
		t.Errorf("/slow: %+v", out)
	}
	if took := time.Since(start); took > 2500*time.Millisecond {
		t.Errorf("a 1 s timeout took %v", took)
	}
	named := &corev1.Probe{TimeoutSeconds: 1, ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ok", Port: intstr.FromString("web")}}}
	c := &corev1.Container{Ports: []corev1.ContainerPort{{Name: "web", ContainerPort: int32(port)}}}
	if out := h.probe(context.Background(), named, Target{PodIP: "127.0.0.1", Container: c}); out.result != Success {
		t.Errorf("named port: %+v", out)
	}
}

func TestTCPProbe(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port := hostPort(t, l.Addr().String())
	h := NewHandlers(nil)
	spec := &corev1.Probe{TimeoutSeconds: 1, ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(int32(port))}}}
	if out := h.probe(context.Background(), spec, Target{PodIP: "127.0.0.1"}); out.result != Success {
		t.Errorf("listening: %+v", out)
	}
	l.Close()
	if out := h.probe(context.Background(), spec, Target{PodIP: "127.0.0.1"}); out.result != Failure {
		t.Errorf("closed: %+v", out)
	}
}

func TestGRPCProbe(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	hs := health.NewServer()
	hs.SetServingStatus("good", healthpb.HealthCheckResponse_SERVING)
	hs.SetServingStatus("bad", healthpb.HealthCheckResponse_NOT_SERVING)
	healthpb.RegisterHealthServer(srv, hs)
	go srv.Serve(l)
	defer srv.Stop()
	_, port := hostPort(t, l.Addr().String())
	h := NewHandlers(nil)
	check := func(service string) outcome {
		spec := &corev1.Probe{TimeoutSeconds: 1, ProbeHandler: corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: int32(port), Service: &service}}}
		return h.probe(context.Background(), spec, Target{PodIP: "127.0.0.1"})
	}
	if out := check("good"); out.result != Success {
		t.Errorf("serving: %+v", out)
	}
	if out := check("bad"); out.result != Failure || !strings.Contains(out.message, "NOT_SERVING") {
		t.Errorf("not serving: %+v", out)
	}
}

type fakeExec struct {
	cmd  []string
	resp *runtimeapi.ExecSyncResponse
	err  error
}

func (f *fakeExec) ExecSync(_ context.Context, _ string, cmd []string, _ time.Duration) (*runtimeapi.ExecSyncResponse, error) {
	f.cmd = cmd
	return f.resp, f.err
}

func TestExecProbe(t *testing.T) {
	f := &fakeExec{resp: &runtimeapi.ExecSyncResponse{ExitCode: 0, Stdout: []byte("fine")}}
	h := NewHandlers(f)
	c := &corev1.Container{Env: []corev1.EnvVar{{Name: "FILE", Value: "/tmp/health"}}}
	spec := &corev1.Probe{TimeoutSeconds: 1, ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"cat", "$(FILE)"}}}}
	if out := h.probe(context.Background(), spec, Target{Container: c}); out.result != Success || f.cmd[1] != "/tmp/health" {
		t.Errorf("exit 0: %+v, command %q", out, f.cmd)
	}
	f.resp = &runtimeapi.ExecSyncResponse{ExitCode: 1, Stderr: []byte("cat: can't open")}
	if out := h.probe(context.Background(), spec, Target{Container: c}); out.result != Failure || out.output != "cat: can't open" || strings.Contains(out.message, "can't open") {
		t.Errorf("exit 1: %+v", out)
	}
	f.resp, f.err = nil, &cri.Error{Op: "ExecSync", Code: codes.DeadlineExceeded, Msg: "timeout 1s exceeded"}
	if out := h.probe(context.Background(), spec, Target{Container: c}); out.result != Failure {
		t.Errorf("timeout must be a failure: %+v", out)
	}
}

func TestHooks(t *testing.T) {
	hits := make(chan string, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits <- r.URL.Path + " " + r.UserAgent()
		w.WriteHeader(500) // hooks ignore the status code
	}))
	defer srv.Close()
	_, port := hostPort(t, srv.URL)
	f := &fakeExec{resp: &runtimeapi.ExecSyncResponse{ExitCode: 0}}
	h := NewHandlers(f)
	target := Target{PodIP: "127.0.0.1", ContainerID: "c1"}
	if err := h.RunHook(context.Background(), &corev1.LifecycleHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/start", Port: intstr.FromInt32(int32(port))}}, target); err != nil {
		t.Errorf("http hook: %v", err)
	}
	if got := <-hits; got != "/start kube-lifecycle/1.37" {
		t.Errorf("hit %q", got)
	}
	f.resp = &runtimeapi.ExecSyncResponse{ExitCode: 2, Stdout: []byte("nope")}
	if err := h.RunHook(context.Background(), &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"false"}}}, target); err == nil || !strings.Contains(err.Error(), "exited with 2") {
		t.Errorf("failing exec hook: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := h.RunHook(ctx, &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: 5}}, target); err == nil {
		t.Error("a sleep cut short must fail")
	}
	if err := h.RunHook(context.Background(), &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: 0}}, target); err != nil {
		t.Errorf("sleep 0: %v", err)
	}
}

func TestValidate(t *testing.T) {
	probe := func(mod func(*corev1.Probe)) *corev1.Probe {
		p := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(80)}}, TimeoutSeconds: 1, PeriodSeconds: 10, SuccessThreshold: 1, FailureThreshold: 3}
		mod(p)
		return p
	}
	grace := int64(10)
	cases := map[string]struct {
		c    corev1.Container
		want string // substring of the error; "" = valid
	}{
		"valid": {corev1.Container{LivenessProbe: probe(func(*corev1.Probe) {})}, ""},
		"liveness successThreshold": {corev1.Container{LivenessProbe: probe(func(p *corev1.Probe) { p.SuccessThreshold = 2 })},
			"spec.containers[0].livenessProbe.successThreshold: Invalid value: 2: must be 1"},
		"readiness successThreshold 2 ok": {corev1.Container{ReadinessProbe: probe(func(p *corev1.Probe) { p.SuccessThreshold = 2 })}, ""},
		"port out of range": {corev1.Container{ReadinessProbe: probe(func(p *corev1.Probe) { p.TCPSocket.Port = intstr.FromInt32(70000) })},
			"spec.containers[0].readinessProbe.tcpSocket.port: Invalid value: 70000"},
		"unknown named port": {corev1.Container{StartupProbe: probe(func(p *corev1.Probe) { p.TCPSocket.Port = intstr.FromString("web") })},
			`spec.containers[0].startupProbe.tcpSocket.port: Not found: "web"`},
		"two handlers": {corev1.Container{LivenessProbe: probe(func(p *corev1.Probe) { p.Exec = &corev1.ExecAction{Command: []string{"true"}} })},
			"may not specify more than 1 handler type"},
		"readiness grace": {corev1.Container{ReadinessProbe: probe(func(p *corev1.Probe) { p.TerminationGracePeriodSeconds = &grace })},
			"must not be set for readinessProbes"},
		"sleep longer than grace": {corev1.Container{Lifecycle: &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: 60}}}},
			"spec.containers[0].lifecycle.preStop.sleep.seconds: Invalid value: 60"},
		"tcp hook": {corev1.Container{Lifecycle: &corev1.Lifecycle{PostStart: &corev1.LifecycleHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(80)}}}},
			"lifecycle.postStart.tcpSocket: Unsupported value"},
	}
	for name, tc := range cases {
		tc.c.Name = "app"
		pod := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{tc.c}, TerminationGracePeriodSeconds: &grace}}
		errs := Validate(pod)
		switch {
		case tc.want == "" && len(errs) > 0:
			t.Errorf("%s: unexpected %v", name, errs)
		case tc.want != "" && (len(errs) == 0 || !strings.Contains(errs.ToAggregate().Error(), tc.want)):
			t.Errorf("%s: got %v, want %q", name, errs, tc.want)
		}
	}
	initProbe := &corev1.Pod{Spec: corev1.PodSpec{InitContainers: []corev1.Container{{Name: "init", LivenessProbe: probe(func(*corev1.Probe) {})}}}}
	if errs := Validate(initProbe); len(errs) == 0 {
		t.Error("a probe on a plain init container must be refused")
	}
}
