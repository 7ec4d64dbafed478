//go:build integration

package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// A container that exits with a code its RestartAllContainers rule
// matches restarts the whole pod in its sandbox: every container is
// stopped and removed, the init container runs again, then the sidecar
// and the app containers, each counting a restart with its last state;
// the emptyDir and the sandbox stay.
func TestRestartAllContainers(t *testing.T) {
	n := newNode(t, "")
	n.writeManifest("all.yaml", fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: restart-all
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 2
  volumes: [{name: data, emptyDir: {}}]
  initContainers:
  - name: init
    image: %s
    command: ["sh", "-c", "echo run >> /data/init-runs"]
    volumeMounts: [{name: data, mountPath: /data}]
  - name: sidecar
    image: %[1]s
    restartPolicy: Always
    command: ["sleep", "3600"]
  containers:
  - name: source
    image: %[1]s
    command: ["sh", "-c", "if [ ! -e /data/triggered ]; then touch /data/triggered; sleep 1; exit 42; fi; exec sleep 3600"]
    restartPolicy: Never
    restartPolicyRules:
    - action: RestartAllContainers
      exitCodes: {operator: In, values: [42]}
    volumeMounts: [{name: data, mountPath: /data}]
  - name: regular
    image: %[1]s
    command: ["sleep", "3600"]
`, testImage))
	n.start()
	first := n.waitRunning("restart-all")
	sandboxes, _ := n.runtimeObjects(string(first.UID))
	p := n.waitPod("restart-all", time.Minute, "every container restarted once, the app containers running", func(p *corev1.Pod) error {
		if p == nil {
			return fmt.Errorf("not listed")
		}
		all := append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...)
		for _, cs := range all {
			if cs.RestartCount < 1 || cs.LastTerminationState.Terminated == nil {
				return fmt.Errorf("%s: restartCount %d, lastState %+v", cs.Name, cs.RestartCount, cs.LastTerminationState)
			}
			if cs.Name != "init" && cs.State.Running == nil {
				return fmt.Errorf("%s: state %+v", cs.Name, cs.State)
			}
		}
		return nil
	})
	if p.Status.Phase != corev1.PodRunning {
		t.Errorf("phase %s", p.Status.Phase)
	}
	for _, cs := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
		if cs.RestartCount != 1 {
			t.Errorf("%s restarted %d times, want once (no loop)", cs.Name, cs.RestartCount)
		}
	}
	var cond *corev1.PodCondition
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == corev1.AllContainersRestarting {
			cond = &p.Status.Conditions[i]
		}
	}
	if cond == nil || cond.Status != corev1.ConditionFalse {
		t.Errorf("AllContainersRestarting: %+v, want False once the pod runs again", cond)
	}
	if out, _ := n.execIn(p, "regular", "true"); out != "" {
		t.Errorf("exec: %q", out)
	}
	if out, _ := n.execIn(p, "source", "cat", "/data/init-runs"); strings.Count(out, "run") != 2 {
		t.Errorf("the init container ran %d times in the pod's emptyDir, want 2: %q", strings.Count(out, "run"), out)
	}
	after, _ := n.runtimeObjects(string(p.UID))
	if len(after) != 1 || len(sandboxes) != 1 || after[0].Id != sandboxes[0].Id {
		t.Errorf("sandboxes before %d, after %d: the reset keeps the pod's sandbox", len(sandboxes), len(after))
	}
	if !strings.Contains(n.logText(), "restarting all containers") {
		t.Error("the agent did not say it restarted all containers")
	}
}
