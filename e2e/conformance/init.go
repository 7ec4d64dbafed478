package conformance

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Init containers and sidecars (restartable init containers).

func initContainersOnRestartNever(t *T) error {
	pod := shellPod("init-never", corev1.RestartPolicyNever, "true")
	pod.Spec.InitContainers = []corev1.Container{
		{Name: "init1", Command: []string{"/bin/true"}}, {Name: "init2", Command: []string{"/bin/true"}},
	}
	name, err := t.Create(pod)
	if err != nil {
		return err
	}
	p, err := t.WaitPod(name, time.Minute, "phase Succeeded", phase(corev1.PodSucceeded))
	if err != nil {
		return err
	}
	for _, c := range []string{"init1", "init2", "main"} {
		cs := containerStatus(p, c)
		if cs == nil || cs.State.Terminated == nil || cs.State.Terminated.Reason != "Completed" {
			return fmt.Errorf("container %s: %+v, want terminated Completed", c, cs)
		}
	}
	if a, b := containerStatus(p, "init2").State.Terminated.StartedAt, containerStatus(p, "init1").State.Terminated.FinishedAt; a.Before(&b) {
		return fmt.Errorf("init2 started at %s, before init1 finished at %s", a, b)
	}
	return nil
}

func failingInitFailsThePod(t *T) error {
	pod := shellPod("init-fails", corev1.RestartPolicyNever, "true")
	pod.Spec.InitContainers = []corev1.Container{{Name: "init1", Command: []string{"/bin/false"}}, {Name: "init2", Command: []string{"/bin/true"}}}
	name, err := t.Create(pod)
	if err != nil {
		return err
	}
	p, err := t.WaitPod(name, time.Minute, "phase Failed", phase(corev1.PodFailed))
	if err != nil {
		return err
	}
	if cs := containerStatus(p, "init1"); cs == nil || cs.State.Terminated == nil || cs.State.Terminated.ExitCode != 1 {
		return fmt.Errorf("init1 %+v, want terminated with exit code 1", cs)
	}
	for _, c := range []string{"init2", "main"} {
		if cs := containerStatus(p, c); cs != nil && (cs.State.Running != nil || cs.State.Terminated != nil) {
			return fmt.Errorf("container %s ran after init1 failed: %+v", c, cs.State)
		}
	}
	return nil
}

func initContainersOnRestartAlways(t *T) error {
	pod := shellPod("init-always", corev1.RestartPolicyAlways, "sleep 600")
	pod.Spec.InitContainers = []corev1.Container{{Name: "init1", Command: []string{"/bin/true"}}, {Name: "init2", Command: []string{"/bin/true"}}}
	name, err := t.Create(pod)
	if err != nil {
		return err
	}
	p, err := t.WaitPod(name, time.Minute, "running", running)
	if err != nil {
		return err
	}
	for _, c := range []string{"init1", "init2"} {
		if cs := containerStatus(p, c); cs == nil || cs.State.Terminated == nil || cs.State.Terminated.Reason != "Completed" {
			return fmt.Errorf("init container %s: %+v, want terminated Completed", c, cs)
		}
	}
	if cs := containerStatus(p, "main"); cs == nil || cs.State.Running == nil {
		return fmt.Errorf("main: %+v, want running", cs)
	}
	return nil
}

func failingInitOnRestartAlwaysKeepsAppDown(t *T) error {
	pod := shellPod("init-always-fails", corev1.RestartPolicyAlways, "sleep 600")
	pod.Spec.InitContainers = []corev1.Container{{Name: "init1", Command: []string{"/bin/false"}}}
	name, err := t.Create(pod)
	if err != nil {
		return err
	}
	p, err := t.WaitPod(name, time.Minute, "the init container retried", func(p *corev1.Pod) error {
		if p == nil {
			return errors.New("not listed yet")
		}
		if cs := containerStatus(p, "init1"); cs == nil || cs.RestartCount < 1 {
			return fmt.Errorf("init1 %+v", cs)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if p.Status.Phase != corev1.PodPending {
		return fmt.Errorf("phase %s, want Pending while init fails", p.Status.Phase)
	}
	if cs := containerStatus(p, "main"); cs != nil && (cs.State.Running != nil || cs.State.Terminated != nil) {
		return fmt.Errorf("main started although init1 fails: %+v", cs.State)
	}
	return nil
}

func sidecarStartsBeforeTheApp(t *T) error {
	always := corev1.ContainerRestartPolicyAlways
	pod := shellPod("sidecar", corev1.RestartPolicyNever, "sleep 600")
	// The sidecar reports started 3 s in (its startup probe); the app must
	// wait for that, so it starts seconds later (status times are in
	// whole seconds).
	pod.Spec.InitContainers = []corev1.Container{{Name: "sidecar", Command: []string{"sh", "-c", "sleep 3; touch /tmp/up; sleep 600"}, RestartPolicy: &always,
		StartupProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"cat", "/tmp/up"}}}, PeriodSeconds: 1, FailureThreshold: 30}}}
	name, err := t.Create(pod)
	if err != nil {
		return err
	}
	p, err := t.WaitPod(name, time.Minute, "both running", func(p *corev1.Pod) error {
		if p == nil {
			return errors.New("not listed yet")
		}
		for _, c := range []string{"sidecar", "main"} {
			if cs := containerStatus(p, c); cs == nil || cs.State.Running == nil {
				return fmt.Errorf("%s not running: %+v", c, cs)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	side, app := containerStatus(p, "sidecar").State.Running.StartedAt, containerStatus(p, "main").State.Running.StartedAt
	if app.Sub(side.Time) < 2*time.Second {
		return fmt.Errorf("main started at %s, less than 2 s after its sidecar (%s), which was not started before 3 s", app, side)
	}
	return nil
}

func sidecarsTerminateInReverseOrder(t *T) error {
	// Each container appends its name to a host file as it exits. On
	// SIGTERM sidecar i takes i-1 seconds to go: stopped all at once they
	// would exit s1, s2, s3; stopped one after the other, last first (the
	// kubelet's order, KEP-753), they exit s3, s2, s1.
	always := corev1.ContainerRestartPolicyAlways
	pod := shellPod("sidecar-order", corev1.RestartPolicyNever, "sleep 3; echo main >> /out/exits")
	grace := int64(10) // room for the 3 s the sidecars take, one after the other
	pod.Spec.TerminationGracePeriodSeconds = &grace
	dir, err := withHostOut(t, pod)
	if err != nil {
		return err
	}
	pod.Spec.Containers[0].VolumeMounts = outMount
	for i := 1; i <= 3; i++ {
		script := fmt.Sprintf("trap 'sleep %d; echo s%d >> /out/exits; exit 0' TERM; while true; do sleep 0.1; done", i-1, i)
		pod.Spec.InitContainers = append(pod.Spec.InitContainers, corev1.Container{
			Name: fmt.Sprintf("s%d", i), Command: []string{"sh", "-c", script}, RestartPolicy: &always, VolumeMounts: outMount})
	}
	name, err := t.Create(pod)
	if err != nil {
		return err
	}
	if _, err := t.WaitPod(name, 2*time.Minute, "phase Succeeded", phase(corev1.PodSucceeded)); err != nil {
		return err
	}
	got, err := os.ReadFile(filepath.Join(dir, "exits"))
	if order := strings.Fields(string(got)); err != nil || strings.Join(order, " ") != "main s3 s2 s1" {
		return fmt.Errorf("containers exited in the order %q (%v), want main s3 s2 s1", order, err)
	}
	return nil
}
