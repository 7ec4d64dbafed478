//go:build integration

package integration

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// logindDropIn is where the agent raises logind's InhibitDelayMaxSec, as
// the kubelet does.
const logindDropIn = "/etc/systemd/logind.conf.d/99-kubelet.conf"

// needLogind skips where systemd-logind is not on the system bus (this
// host: no systemd as PID 1); the v2 lane's VM has it.
func needLogind(t *testing.T) {
	t.Helper()
	if _, err := os.Stat("/run/systemd/system"); err != nil {
		t.Skip("graceful node shutdown needs systemd-logind (no systemd as PID 1 here): make test-v2 runs it")
	}
	if out, err := exec.Command("busctl", "status", "org.freedesktop.login1").CombinedOutput(); err != nil {
		t.Skipf("graceful node shutdown needs systemd-logind on the system bus: %v: %s", err, out)
	}
}

// prepareForShutdown sends logind's signal as the upstream
// GracefulNodeShutdown specs do (they emit it themselves).
func prepareForShutdown(t *testing.T, shutting bool) {
	t.Helper()
	out, err := exec.Command("busctl", "emit", "/org/freedesktop/login1", "org.freedesktop.login1.Manager",
		"PrepareForShutdown", "b", fmt.Sprint(shutting)).CombinedOutput()
	if err != nil {
		t.Fatalf("busctl emit PrepareForShutdown %v: %v: %s", shutting, err, out)
	}
}

// agentInhibitors lists logind's inhibitor locks held by the agent's
// process, as `systemd-inhibit --list` shows them.
func agentInhibitors(t *testing.T, pid int) []string {
	t.Helper()
	out, err := exec.Command("systemd-inhibit", "--list", "--no-pager", "--no-legend").CombinedOutput()
	if err != nil {
		t.Fatalf("systemd-inhibit --list: %v: %s", err, out)
	}
	var held []string
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) > 3 && f[0] == "kubelet" && f[3] == fmt.Sprint(pid) {
			held = append(held, line)
		}
	}
	return held
}

func readyCondition(node corev1.Node) (corev1.ConditionStatus, string) {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status, c.Message
		}
	}
	return "", ""
}

// On logind's PrepareForShutdown the agent stops the pods below
// system-critical priority first, then the critical ones, each group
// within its share; the pods end Failed with the kubelet's reason and
// message, the node turns NotReady and the delay lock is let go. A
// cancelled shutdown takes the lock again and the node is Ready.
func TestGracefulNodeShutdown(t *testing.T) {
	needLogind(t)
	if _, err := os.Stat(logindDropIn); errors.Is(err, os.ErrNotExist) {
		t.Cleanup(func() {
			os.Remove(logindDropIn)
			exec.Command("systemctl", "kill", "-s", "HUP", "systemd-logind").Run()
		})
	}
	n := newNode(t, "shutdownGracePeriod: 20s\nshutdownGracePeriodCriticalPods: 10s\n")
	record := t.TempDir()
	pod := func(name, priority, onTerm string) string {
		return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %[1]s
spec:
  priority: %[2]s
  terminationGracePeriodSeconds: 30
  volumes: [{name: record, hostPath: {path: %[4]s}}]
  containers:
  - name: main
    image: %[3]s
    command: ["sh", "-c", "trap '%[5]s; echo %[1]s >> /record/order; exit 0' TERM; while true; do sleep 1 & wait $!; done"]
    volumeMounts: [{name: record, mountPath: /record}]
`, name, priority, testImage, record, onTerm)
	}
	n.writeManifest("regular.yaml", pod("regular", "0", "sleep 2"))
	n.writeManifest("critical.yaml", pod("critical", "2000001000", "true"))
	begin := time.Now()
	n.start()
	n.waitRunning("regular")
	n.waitRunning("critical")
	t.Logf("pods running after %s", time.Since(begin).Round(time.Millisecond))
	pid := n.agent.Pid()
	n.eventually("the agent's delay lock", 30*time.Second, func() error {
		if held := agentInhibitors(t, pid); len(held) != 1 || !strings.Contains(held[0], "delay") {
			return fmt.Errorf("inhibitors of pid %d: %q\nagent log:\n%s", pid, held, n.logText())
		}
		return nil
	})
	if b, err := os.ReadFile(logindDropIn); err != nil || !strings.Contains(string(b), "InhibitDelayMaxSec=20") {
		t.Errorf("logind's delay not raised to the 20 s grace period: %s: %q, %v", logindDropIn, b, err)
	}

	prepareForShutdown(t, true)
	signalled := time.Now()
	for _, name := range []string{"regular", "critical"} {
		p := n.waitPod(name, 60*time.Second, "stopped for the shutdown", func(p *corev1.Pod) error {
			if p == nil || p.Status.Phase != corev1.PodFailed {
				return fmt.Errorf("not Failed: %+v", p)
			}
			return nil
		})
		if p.Status.Reason != "Terminated" || p.Status.Message != "Pod was terminated in response to imminent node shutdown." {
			t.Errorf("%s: reason %q message %q, want the kubelet's Terminated and its message", name, p.Status.Reason, p.Status.Message)
		}
	}
	t.Logf("both pods Failed %s after PrepareForShutdown", time.Since(signalled).Round(time.Millisecond))
	if b, _ := os.ReadFile(filepath.Join(record, "order")); string(b) != "regular\ncritical\n" {
		t.Errorf("stop order %q, want the regular pod's group (its 2 s stop included) before the critical one", b)
	}
	if status, msg := readyCondition(n.nodeObject()); status != corev1.ConditionFalse || !strings.Contains(msg, "node is shutting down") {
		t.Errorf("node Ready %s (%q) while shutting down", status, msg)
	}
	n.eventually("the lock let go", 30*time.Second, func() error {
		if held := agentInhibitors(t, pid); len(held) != 0 {
			return fmt.Errorf("still held: %q", held)
		}
		return nil
	})

	prepareForShutdown(t, false)
	n.eventually("the lock taken again and the node Ready", 30*time.Second, func() error {
		if held := agentInhibitors(t, pid); len(held) != 1 {
			return fmt.Errorf("inhibitors after the cancel: %q", held)
		}
		if status, msg := readyCondition(n.nodeObject()); status != corev1.ConditionTrue {
			return fmt.Errorf("node Ready %s (%q)", status, msg)
		}
		return nil
	})
}
