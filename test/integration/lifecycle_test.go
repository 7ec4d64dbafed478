//go:build integration

package integration

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

func shPod(name, extraSpec, script string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
spec:
%s  containers:
  - name: main
    image: %s
    command: ["sh", "-c", %q]
`, name, extraSpec, testImage, script)
}

func (n *node) events(uid string) []corev1.Event {
	n.t.Helper()
	resp, err := http.Get(n.url("/events"))
	if err != nil {
		n.t.Fatal(err)
	}
	defer resp.Body.Close()
	var list corev1.EventList
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		n.t.Fatal(err)
	}
	var out []corev1.Event
	for _, e := range list.Items {
		if string(e.InvolvedObject.UID) == uid {
			out = append(out, e)
		}
	}
	return out
}

func TestTerminationMessages(t *testing.T) {
	n := newNode(t, "")
	n.writeManifest("file.yaml", shPod("file", "  restartPolicy: Never\n", "printf 'bye from file' > /dev/termination-log; exit 0"))
	n.writeManifest("logs.yaml", strings.Replace(shPod("logs", "  restartPolicy: Never\n", "echo first; echo the last words; exit 3"),
		"    command:", "    terminationMessagePolicy: FallbackToLogsOnError\n    command:", 1))
	n.writeManifest("custom.yaml", strings.Replace(shPod("custom", "  restartPolicy: Never\n", "echo custom path > /tmp/msg; exit 1"),
		"    command:", "    terminationMessagePath: /tmp/msg\n    command:", 1))
	n.start()
	for name, want := range map[string]struct {
		phase corev1.PodPhase
		msg   string
	}{
		"file":   {corev1.PodSucceeded, "bye from file"},
		"logs":   {corev1.PodFailed, "first\nthe last words\n"},
		"custom": {corev1.PodFailed, "custom path\n"},
	} {
		n.waitPod(name, 60*time.Second, "terminated with its message", func(p *corev1.Pod) error {
			if p == nil || p.Status.Phase != want.phase {
				return fmt.Errorf("phase %v", p)
			}
			term := p.Status.ContainerStatuses[0].State.Terminated
			if term == nil || term.Message != want.msg {
				return fmt.Errorf("terminated %+v, want message %q", term, want.msg)
			}
			return nil
		})
	}
}

func TestActiveDeadlineFailsThePod(t *testing.T) {
	n := newNode(t, "")
	n.writeManifest("deadline.yaml", podManifest("deadline", "")+"  activeDeadlineSeconds: 2\n")
	n.start()
	n.waitRunning("deadline")
	p := n.waitPod("deadline", 60*time.Second, "failed with DeadlineExceeded", func(p *corev1.Pod) error {
		if p == nil || p.Status.Phase != corev1.PodFailed || p.Status.Reason != "DeadlineExceeded" {
			return fmt.Errorf("status %+v", p)
		}
		if p.Status.ContainerStatuses[0].State.Terminated == nil {
			return fmt.Errorf("container not terminated yet: %+v", p.Status.ContainerStatuses[0].State)
		}
		return nil
	})
	if p.Status.Message != "Pod was active on the node longer than the specified deadline" {
		t.Errorf("message %q", p.Status.Message)
	}
	if elapsed := p.Status.ContainerStatuses[0].State.Terminated.FinishedAt.Sub(p.Status.StartTime.Time); elapsed < 2*time.Second {
		t.Errorf("stopped %s after start, before the 2 s deadline", elapsed)
	}
	// It stays Failed: no restart even under restartPolicy Always.
	time.Sleep(3 * time.Second)
	if p, _ := n.pod("deadline"); p.Status.Phase != corev1.PodFailed || p.Status.ContainerStatuses[0].RestartCount != 0 {
		t.Errorf("after the deadline: %s, restarts %d", p.Status.Phase, p.Status.ContainerStatuses[0].RestartCount)
	}
}

func TestGracePeriodIsHonoured(t *testing.T) {
	n := newNode(t, "")
	// "stubborn" ignores SIGTERM and must be killed at the deadline; "polite"
	// exits on SIGTERM and must go at once.
	n.writeManifest("stubborn.yaml", shPod("stubborn", "  terminationGracePeriodSeconds: 5\n", "trap '' TERM; while true; do sleep 1; done"))
	n.writeManifest("polite.yaml", shPod("polite", "  terminationGracePeriodSeconds: 30\n", "trap 'exit 0' TERM; while true; do sleep 1 & wait $!; done"))
	n.start()
	n.waitRunning("stubborn")
	n.waitRunning("polite")
	removed := time.Now()
	n.removeManifest("stubborn.yaml")
	n.removeManifest("polite.yaml")
	gone := map[string]time.Duration{}
	n.eventually("both pods gone", 60*time.Second, func() error {
		for _, name := range []string{"stubborn", "polite"} {
			if _, ok := gone[name]; ok {
				continue
			}
			if p, err := n.pod(name); err == nil && p == nil {
				gone[name] = time.Since(removed)
			}
		}
		if len(gone) < 2 {
			return fmt.Errorf("gone so far: %v", gone)
		}
		return nil
	})
	if gone["stubborn"] < 5*time.Second {
		t.Errorf("a container ignoring SIGTERM was killed after %s, before its 5 s grace period", gone["stubborn"])
	}
	if gone["polite"] >= 5*time.Second {
		t.Errorf("a container that exits on SIGTERM took %s: the stop signal was not SIGTERM", gone["polite"])
	}
}

func TestSidecarStartsFirstAndStopsLast(t *testing.T) {
	n := newNode(t, "")
	n.writeManifest("sidecar.yaml", fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: withsidecar
spec:
  terminationGracePeriodSeconds: 10
  initContainers:
  - name: helper
    image: %[1]s
    restartPolicy: Always
    command: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1 & wait $!; done"]
  containers:
  - name: app
    image: %[1]s
    command: ["sh", "-c", "trap 'sleep 2; exit 0' TERM; while true; do sleep 1 & wait $!; done"]
`, testImage))
	n.start()
	p := n.waitRunning("withsidecar")
	sidecar, app := p.Status.InitContainerStatuses[0], p.Status.ContainerStatuses[0]
	if sidecar.State.Running == nil || app.State.Running.StartedAt.Before(&sidecar.State.Running.StartedAt) {
		t.Errorf("sidecar %+v, app %+v: the sidecar must run, and start first", sidecar.State, app.State)
	}
	if p.Status.Conditions[1].Status != corev1.ConditionTrue {
		t.Errorf("Initialized: %+v", p.Status.Conditions[1])
	}
	n.removeManifest("sidecar.yaml")
	n.waitGone("withsidecar")
	var order []string
	for _, e := range n.events(string(p.UID)) {
		if e.Reason == "Killing" {
			order = append(order, e.InvolvedObject.FieldPath)
		}
	}
	if strings.Join(order, ",") != "spec.containers{app},spec.initContainers{helper}" {
		t.Errorf("stop order %v: the sidecar must stop after the app", order)
	}
}
