//go:build integration

package integration

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// serverPod runs probe-server (HTTP :8080, TCP :8081, gRPC :8082) with
// args, and the container fields in extra (indented four spaces).
func serverPod(name, args, extra string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s}
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: main
    image: %s
    command: ["probe-server"%s]
    ports: [{name: http, containerPort: 8080}, {name: tcp, containerPort: 8081}, {name: grpc, containerPort: 8082}]
%s`, name, testImage, args, extra)
}

// scriptPod runs a shell script with the container fields in extra.
func scriptPod(name, podSpec, script, extra string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s}
spec:
  terminationGracePeriodSeconds: 2
%s  volumes: [{name: state, emptyDir: {}}]
  containers:
  - name: main
    image: %s
    command: ["sh", "-c", %q]
    volumeMounts: [{name: state, mountPath: /state}]
%s`, name, podSpec, testImage, script, extra)
}

func restarts(p *corev1.Pod) int32 {
	if p == nil || len(p.Status.ContainerStatuses) == 0 {
		return 0
	}
	return p.Status.ContainerStatuses[0].RestartCount
}

func podReady(p *corev1.Pod) bool {
	if p == nil {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// waitRestarts waits until the pod's first container restarted at least n times.
func (n *node) waitRestarts(name string, want int32, timeout time.Duration) *corev1.Pod {
	n.t.Helper()
	return n.waitPod(name, timeout, fmt.Sprintf("restarted %d times", want), func(p *corev1.Pod) error {
		if got := restarts(p); got < want {
			return fmt.Errorf("restartCount %d", got)
		}
		return nil
	})
}

// hasEvent reports whether the pod has an event with reason whose message
// contains text.
func (n *node) hasEvent(p *corev1.Pod, reason, text string) bool {
	for _, e := range n.events(string(p.UID)) {
		if e.Reason == reason && strings.Contains(e.Message, text) {
			return true
		}
	}
	return false
}

func (n *node) mustPod(name string) *corev1.Pod {
	n.t.Helper()
	p, err := n.pod(name)
	if err != nil || p == nil {
		n.t.Fatalf("pod %s: %v %v", name, p, err)
	}
	return p
}

const period1 = "periodSeconds: 1, timeoutSeconds: 1, failureThreshold: 1"

func TestLivenessProbes(t *testing.T) {
	n := newNode(t, "")
	// Removes its health file once, on its first run only.
	n.writeManifest("exec.yaml", scriptPod("exec-health", "",
		"if [ -e /state/ran ]; then touch /tmp/health; else touch /state/ran /tmp/health; sleep 4; rm /tmp/health; fi; while true; do sleep 1 & wait $!; done",
		"    livenessProbe: {exec: {command: [cat, /tmp/health]}, initialDelaySeconds: 1, "+period1+"}\n"))
	n.writeManifest("http-fail.yaml", serverPod("http-fail", `, "--start-unhealthy"`,
		"    livenessProbe: {httpGet: {path: /healthz, port: http}, "+period1+"}\n"))
	// The healthy ones wait 2 s, as the conformance tests give the server
	// time to listen (they wait 15 s) before a single failure would kill.
	n.writeManifest("http-ok.yaml", serverPod("http-ok", "", "    livenessProbe: {httpGet: {path: /healthz, port: 8080}, initialDelaySeconds: 2, "+period1+"}\n"))
	n.writeManifest("tcp-ok.yaml", serverPod("tcp-ok", "", "    livenessProbe: {tcpSocket: {port: 8081}, initialDelaySeconds: 2, "+period1+"}\n"))
	n.writeManifest("grpc-fail.yaml", serverPod("grpc-fail", `, "--start-unhealthy"`, "    livenessProbe: {grpc: {port: 8082}, "+period1+"}\n"))
	n.writeManifest("grpc-ok.yaml", serverPod("grpc-ok", "", "    livenessProbe: {grpc: {port: 8082, service: any}, initialDelaySeconds: 2, "+period1+"}\n"))
	n.writeManifest("exec-timeout.yaml", scriptPod("exec-timeout", "", "while true; do sleep 1 & wait $!; done",
		"    livenessProbe: {exec: {command: [sleep, '10']}, periodSeconds: 2, timeoutSeconds: 1, failureThreshold: 1}\n"))
	n.writeManifest("redirect-local.yaml", serverPod("redirect-local", `, "--start-unhealthy"`,
		"    livenessProbe: {httpGet: {path: '/redirect?to=/healthz', port: 8080}, "+period1+"}\n"))
	n.writeManifest("redirect-remote.yaml", serverPod("redirect-remote", `, "--start-unhealthy"`,
		"    livenessProbe: {httpGet: {path: '/redirect?to=http://0.0.0.0/healthz', port: 8080}, initialDelaySeconds: 2, "+period1+"}\n"))
	// The pod's grace would be 10 minutes; the probe's is 2 s. sh as PID 1
	// ignores SIGTERM, so only SIGKILL ends it.
	n.writeManifest("probe-grace.yaml", scriptPod("probe-grace", "  terminationGracePeriodSeconds: 600\n", "while true; do sleep 1; done",
		"    livenessProbe: {exec: {command: ['false']}, initialDelaySeconds: 2, terminationGracePeriodSeconds: 2, "+period1+"}\n"))
	n.start()
	running := time.Now()

	t.Run("exec liveness restarts exactly once after the file is removed", func(t *testing.T) {
		p := n.waitRestarts("exec-health", 1, 90*time.Second)
		if !n.hasEvent(p, "Killing", "Container main failed liveness probe, will be restarted") {
			t.Error("no Killing event for the liveness failure")
		}
		if !n.hasEvent(p, "Unhealthy", "Liveness probe failed: ") {
			t.Error("no Unhealthy event")
		}
		n.waitRunning("exec-health")
		time.Sleep(8 * time.Second)
		if got := restarts(n.mustPod("exec-health")); got != 1 {
			t.Errorf("restartCount %d, want exactly 1", got)
		}
	})
	t.Run("http liveness restarts with a monotonically increasing count", func(t *testing.T) {
		last := int32(0)
		n.waitPod("http-fail", 120*time.Second, "restarted 3 times", func(p *corev1.Pod) error {
			got := restarts(p)
			if got < last {
				t.Fatalf("restartCount went down from %d to %d", last, got)
			}
			last = got
			if got < 3 {
				return fmt.Errorf("restartCount %d", got)
			}
			return nil
		})
	})
	t.Run("grpc liveness restarts", func(t *testing.T) {
		p := n.waitRestarts("grpc-fail", 1, 60*time.Second)
		if !n.hasEvent(p, "Unhealthy", "NOT_SERVING") {
			t.Error("no Unhealthy event naming the gRPC status")
		}
	})
	t.Run("exec probe timeout is a failure", func(t *testing.T) { n.waitRestarts("exec-timeout", 1, 60*time.Second) })
	t.Run("local redirect is followed", func(t *testing.T) { n.waitRestarts("redirect-local", 1, 60*time.Second) })
	t.Run("probe terminationGracePeriodSeconds overrides the pod's", func(t *testing.T) {
		// With the pod's 600 s the kill could not complete in this window.
		p := n.waitRestarts("probe-grace", 1, 60*time.Second)
		if term := p.Status.ContainerStatuses[0].LastTerminationState.Terminated; term == nil || term.ExitCode != 137 {
			t.Errorf("last termination %+v, want SIGKILL (137) after the probe's grace", term)
		}
	})
	t.Run("healthy probes do not restart", func(t *testing.T) {
		if wait := 15*time.Second - time.Since(running); wait > 0 {
			time.Sleep(wait)
		}
		for _, name := range []string{"http-ok", "tcp-ok", "grpc-ok", "redirect-remote"} {
			p := n.mustPod(name)
			if restarts(p) != 0 || p.Status.ContainerStatuses[0].State.Running == nil {
				t.Errorf("%s: restartCount %d state %+v", name, restarts(p), p.Status.ContainerStatuses[0].State)
			}
			if !podReady(p) {
				t.Errorf("%s: not ready without a readiness probe", name)
			}
		}
		if p := n.mustPod("redirect-remote"); !n.hasEvent(p, "ProbeWarning", "Probe terminated redirects") {
			t.Error("a redirect to another host gave no ProbeWarning event")
		}
	})
}

func TestReadinessProbes(t *testing.T) {
	n := newNode(t, "")
	n.writeManifest("delay.yaml", serverPod("ready-delay", "",
		"    readinessProbe: {httpGet: {path: /healthz, port: 8080}, initialDelaySeconds: 8, periodSeconds: 1}\n"))
	n.writeManifest("fail.yaml", serverPod("ready-fail", `, "--start-unhealthy"`,
		"    readinessProbe: {httpGet: {path: /healthz, port: 8080}, periodSeconds: 1}\n"))
	n.writeManifest("flip.yaml", serverPod("ready-flip", "",
		"    readinessProbe: {tcpSocket: {port: tcp}, periodSeconds: 1, failureThreshold: 1}\n"))
	n.writeManifest("invalid.yaml", serverPod("invalid", "",
		"    livenessProbe: {httpGet: {path: /healthz, port: 8080}, successThreshold: 2}\n"))
	n.start()

	t.Run("not ready before the initial delay, then ready, never restarted", func(t *testing.T) {
		n.waitRunning("ready-delay")
		seen := time.Now()
		for time.Since(seen) < 6*time.Second {
			p := n.mustPod("ready-delay")
			if podReady(p) || p.Status.ContainerStatuses[0].Ready {
				t.Fatalf("ready %v after the container ran, before its 8 s initial delay", time.Since(seen))
			}
			time.Sleep(200 * time.Millisecond)
		}
		p := n.waitPod("ready-delay", 30*time.Second, "ready", func(p *corev1.Pod) error {
			if !podReady(p) {
				return fmt.Errorf("conditions %+v", p.Status.Conditions)
			}
			return nil
		})
		if restarts(p) != 0 {
			t.Errorf("restartCount %d", restarts(p))
		}
	})
	t.Run("a failing readiness probe is never ready and never restarts", func(t *testing.T) {
		n.waitRunning("ready-fail")
		for i := 0; i < 20; i++ {
			p := n.mustPod("ready-fail")
			if podReady(p) || restarts(p) != 0 {
				t.Fatalf("ready %v restartCount %d", podReady(p), restarts(p))
			}
			time.Sleep(250 * time.Millisecond)
		}
		p := n.mustPod("ready-fail")
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.ContainersReady && (c.Reason != "ContainersNotReady" || !strings.Contains(c.Message, "[main]")) {
				t.Errorf("ContainersReady %+v", c)
			}
		}
		if !n.hasEvent(p, "Unhealthy", "Readiness probe failed: HTTP probe failed with statuscode: 500") {
			t.Error("no Unhealthy event")
		}
	})
	t.Run("readiness follows the target both ways", func(t *testing.T) {
		p := n.waitRunning("ready-flip")
		ip := p.Status.PodIP
		wantReady := func(want bool) {
			n.waitPod("ready-flip", 20*time.Second, fmt.Sprintf("ready=%v", want), func(p *corev1.Pod) error {
				if podReady(p) != want || p.Status.ContainerStatuses[0].Ready != want {
					return fmt.Errorf("ready %v", podReady(p))
				}
				return nil
			})
		}
		wantReady(true)
		get(t, "http://"+ip+":8080/control/unhealthy")
		wantReady(false)
		get(t, "http://"+ip+":8080/control/healthy")
		wantReady(true)
		if restarts(n.mustPod("ready-flip")) != 0 {
			t.Error("a readiness failure restarted the container")
		}
	})
	t.Run("an invalid probe is refused at admission", func(t *testing.T) {
		p := n.waitRejected("invalid")
		if p.Status.Reason != "InvalidPodSpec" || !strings.Contains(p.Status.Message, "spec.containers[0].livenessProbe.successThreshold: Invalid value: 2: must be 1") {
			t.Errorf("reason %q message %q", p.Status.Reason, p.Status.Message)
		}
	})
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func TestStartupProbes(t *testing.T) {
	n := newNode(t, "")
	n.writeManifest("gates.yaml", scriptPod("startup-gates", "", "sleep 8; touch /tmp/started; while true; do sleep 1 & wait $!; done",
		"    startupProbe: {exec: {command: [cat, /tmp/started]}, periodSeconds: 1, failureThreshold: 60}\n"+
			"    livenessProbe: {exec: {command: ['false']}, "+period1+"}\n"))
	n.writeManifest("fails.yaml", scriptPod("startup-fails", "", "while true; do sleep 1 & wait $!; done",
		"    startupProbe: {exec: {command: ['false']}, periodSeconds: 1, failureThreshold: 2}\n"))
	n.writeManifest("ready.yaml", serverPod("startup-ready", "",
		"    startupProbe: {httpGet: {path: /healthz, port: 8080}, periodSeconds: 1}\n"+
			"    readinessProbe: {httpGet: {path: /healthz, port: 8080}, periodSeconds: 60}\n"))
	n.start()

	t.Run("the startup probe holds liveness back, then liveness runs", func(t *testing.T) {
		n.waitRunning("startup-gates")
		seen := time.Now()
		for time.Since(seen) < 5*time.Second {
			p := n.mustPod("startup-gates")
			cs := p.Status.ContainerStatuses[0]
			if cs.RestartCount != 0 || (cs.Started != nil && *cs.Started) {
				t.Fatalf("before the startup probe succeeded: restartCount %d started %v", cs.RestartCount, *cs.Started)
			}
			time.Sleep(250 * time.Millisecond)
		}
		p := n.waitRestarts("startup-gates", 1, 60*time.Second)
		if !n.hasEvent(p, "Killing", "failed liveness probe") {
			t.Error("no liveness Killing event after startup")
		}
	})
	t.Run("a failing startup probe restarts the container", func(t *testing.T) {
		p := n.waitRestarts("startup-fails", 1, 60*time.Second)
		if !n.hasEvent(p, "Killing", "Container main failed startup probe, will be restarted") {
			t.Error("no startup Killing event")
		}
	})
	t.Run("readiness runs as soon as the startup probe succeeds", func(t *testing.T) {
		// Its period is 60 s: only the immediate run after startup can make it ready this soon.
		n.waitRunning("startup-ready")
		n.waitPod("startup-ready", 20*time.Second, "ready", func(p *corev1.Pod) error {
			if !podReady(p) {
				return fmt.Errorf("not ready")
			}
			if cs := p.Status.ContainerStatuses[0]; cs.Started == nil || !*cs.Started {
				return fmt.Errorf("not started")
			}
			return nil
		})
	})
}

func TestLifecycleHooks(t *testing.T) {
	n := newNode(t, "")
	n.writeManifest("server.yaml", serverPod("hook-server", "", ""))
	n.start()
	server := n.waitRunning("hook-server").Status.PodIP
	records := func() []string {
		return strings.Fields(get(t, "http://"+server+":8080/records"))
	}
	record := func(name string) string { return fmt.Sprintf("wget -q -O- http://%s:8080/record/%s", server, name) }

	n.writeManifest("http.yaml", scriptPod("hooks-http", "", "trap '"+record("term-http")+"; exit 0' TERM; while true; do sleep 1 & wait $!; done",
		fmt.Sprintf("    lifecycle:\n      postStart: {httpGet: {host: %s, path: /record/poststart-http, port: 8080}}\n      preStop: {httpGet: {host: %s, path: /record/prestop-http, port: 8080}}\n", server, server)))
	n.writeManifest("exec.yaml", scriptPod("hooks-exec", "", "trap '"+record("term-exec")+"; exit 0' TERM; while true; do sleep 1 & wait $!; done",
		fmt.Sprintf("    lifecycle:\n      postStart: {exec: {command: [sh, -c, %q]}}\n      preStop: {exec: {command: [sh, -c, %q]}}\n", record("poststart-exec"), record("prestop-exec"))))
	n.writeManifest("order.yaml", fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: hooks-order}
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: first
    image: %[1]s
    command: [sh, -c, "while true; do sleep 1 & wait $!; done"]
    lifecycle: {postStart: {exec: {command: [sleep, "5"]}}}
  - name: second
    image: %[1]s
    command: [sh, -c, "while true; do sleep 1 & wait $!; done"]
`, testImage))
	n.writeManifest("fail.yaml", scriptPod("hooks-fail", "", "while true; do sleep 1 & wait $!; done",
		"    lifecycle: {postStart: {exec: {command: ['false']}}}\n"))

	t.Run("postStart http and exec hooks reach the server", func(t *testing.T) {
		n.waitRunning("hooks-http")
		n.waitRunning("hooks-exec")
		n.eventually("postStart records", 30*time.Second, func() error {
			got := strings.Join(records(), " ")
			if !strings.Contains(got, "poststart-http") || !strings.Contains(got, "poststart-exec") {
				return fmt.Errorf("records %q", got)
			}
			return nil
		})
	})
	t.Run("the second container starts after the first's postStart completed", func(t *testing.T) {
		p := n.waitRunning("hooks-order")
		first, second := p.Status.ContainerStatuses[0].State.Running, p.Status.ContainerStatuses[1].State.Running
		// Start times have one-second precision; the hook takes 5 s.
		if gap := second.StartedAt.Sub(first.StartedAt.Time); gap < 4*time.Second {
			t.Errorf("second started %v after first; its postStart sleeps 5 s", gap)
		}
	})
	t.Run("a failing postStart kills and restarts the container", func(t *testing.T) {
		p := n.waitRestarts("hooks-fail", 1, 60*time.Second)
		if !n.hasEvent(p, "FailedPostStartHook", "PostStartHook failed") {
			t.Error("no FailedPostStartHook event")
		}
	})
	t.Run("preStop http and exec hooks run before the stop signal", func(t *testing.T) {
		n.removeManifest("http.yaml")
		n.removeManifest("exec.yaml")
		n.waitGone("hooks-http")
		n.waitGone("hooks-exec")
		got := records()
		index := map[string]int{}
		for i, r := range got {
			index[r] = i + 1
		}
		for _, kind := range []string{"http", "exec"} {
			pre, term := index["prestop-"+kind], index["term-"+kind]
			if pre == 0 || term == 0 || pre > term {
				t.Errorf("%s: records %v: want prestop-%s before term-%s", kind, got, kind, kind)
			}
		}
	})
}

func TestProbeStateAcrossAgentRestart(t *testing.T) {
	n := newNode(t, "")
	n.writeManifest("server.yaml", serverPod("restart-server", "", "    readinessProbe: {httpGet: {path: /healthz, port: 8080}, periodSeconds: 10}\n"))
	n.start()
	server := n.waitRunning("restart-server").Status.PodIP
	n.writeManifest("orphan.yaml", scriptPod("orphan", "", "while true; do sleep 1 & wait $!; done",
		fmt.Sprintf("    lifecycle:\n      preStop: {httpGet: {host: %s, path: /record/prestop-orphan, port: 8080}}\n", server)))
	n.waitRunning("orphan")
	n.waitPod("restart-server", 30*time.Second, "ready", func(p *corev1.Pod) error {
		if !podReady(p) {
			return fmt.Errorf("not ready")
		}
		return nil
	})
	if err := n.stop(); err != nil {
		t.Fatal(err)
	}
	n.removeManifest("orphan.yaml") // deleted while the agent is down
	n.start()

	t.Run("a ready container stays ready across the restart", func(t *testing.T) {
		// Every status the new agent shows before its first probe (a jittered
		// period of 10 s) must say ready.
		deadline := time.Now().Add(4 * time.Second)
		seen := 0
		for time.Now().Before(deadline) {
			if p, err := n.pod("restart-server"); err == nil && p != nil && p.Status.Phase != "" {
				seen++
				if !podReady(p) {
					t.Fatalf("the restarted agent shows the ready pod as not ready: %+v", p.Status.Conditions)
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
		if seen == 0 {
			t.Fatal("the restarted agent never listed the pod")
		}
	})
	t.Run("the preStop hook of a pod deleted while the agent was down still runs", func(t *testing.T) {
		n.eventually("prestop-orphan recorded", 60*time.Second, func() error {
			if got := get(t, "http://"+server+":8080/records"); !strings.Contains(got, "prestop-orphan") {
				return fmt.Errorf("records %q", got)
			}
			return nil
		})
	})
}

func TestTerminatingPodProbes(t *testing.T) {
	n := newNode(t, "")
	n.writeManifest("term.yaml", scriptPod("terminating", "  terminationGracePeriodSeconds: 30\n",
		"touch /tmp/ready; trap 'rm -f /tmp/ready; sleep 15; exit 0' TERM; while true; do sleep 1 & wait $!; done",
		"    readinessProbe: {exec: {command: [cat, /tmp/ready]}, "+period1+"}\n"+
			"    livenessProbe: {exec: {command: [cat, /tmp/ready]}, "+period1+"}\n"))
	n.start()
	n.waitRunning("terminating")
	p := n.waitPod("terminating", 30*time.Second, "ready", func(p *corev1.Pod) error {
		if !podReady(p) {
			return fmt.Errorf("not ready")
		}
		return nil
	})
	n.removeManifest("term.yaml")
	// The container removes its readiness file on SIGTERM and lives 15 s more:
	// readiness must turn false meanwhile, and liveness must not restart it.
	n.waitPod("terminating", 12*time.Second, "not ready while terminating", func(p *corev1.Pod) error {
		if p == nil {
			return fmt.Errorf("gone before readiness turned false")
		}
		if podReady(p) {
			return fmt.Errorf("still ready")
		}
		return nil
	})
	n.waitGone("terminating")
	for _, e := range n.events(string(p.UID)) {
		if strings.Contains(e.Message, "failed liveness probe") {
			t.Errorf("liveness killed a terminating pod's container: %s", e.Message)
		}
	}
}
