package conformance

import (
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Probes: liveness (exec, http, tcp, gRPC), startup and readiness.

func execLivenessRestarts(t *T) error {
	pod := shellPod("liveness-exec", corev1.RestartPolicyAlways, "echo ok >/tmp/health; sleep 10; rm -rf /tmp/health; sleep 600")
	pod.Spec.Containers[0].LivenessProbe = &corev1.Probe{
		ProbeHandler:        corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"cat", "/tmp/health"}}},
		InitialDelaySeconds: 5, PeriodSeconds: 2, FailureThreshold: 1, TimeoutSeconds: 1,
	}
	name, err := t.Create(pod)
	if err != nil {
		return err
	}
	return restartedAtLeastOnce(t, name)
}

func readinessWaitsForInitialDelay(t *T) error {
	const delay = 10 * time.Second
	pod := shellPod("readiness-delay", corev1.RestartPolicyAlways, "sleep 600")
	pod.Spec.Containers[0].ReadinessProbe = &corev1.Probe{
		ProbeHandler:        corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}},
		InitialDelaySeconds: int32(delay / time.Second), PeriodSeconds: 1,
	}
	name, err := t.Create(pod)
	if err != nil {
		return err
	}
	p, err := t.WaitPod(name, 2*time.Minute, "ready", func(p *corev1.Pod) error {
		if p == nil || len(p.Status.ContainerStatuses) == 0 || !p.Status.ContainerStatuses[0].Ready {
			return errors.New("not ready yet")
		}
		return nil
	})
	if err != nil {
		return err
	}
	cs := p.Status.ContainerStatuses[0]
	var readySince time.Time
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.ContainersReady {
			readySince = c.LastTransitionTime.Time
		}
	}
	if cs.State.Running == nil || readySince.Sub(cs.State.Running.StartedAt.Time) < delay-time.Second {
		return fmt.Errorf("ready at %s, less than the %s initial delay after the start at %v", readySince, delay, cs.State.Running)
	}
	if cs.RestartCount != 0 {
		return fmt.Errorf("restartCount %d", cs.RestartCount)
	}
	return nil
}

// probeServer runs the test image's probe-server, unhealthy from 8 s on
// (unhealthyAfter > 0) or healthy throughout.
func probeServer(name string, unhealthyAfter int, probe *corev1.Probe) *corev1.Pod {
	script := "exec probe-server --unhealthy-file /tmp/unhealthy"
	if unhealthyAfter > 0 {
		script = fmt.Sprintf("(sleep %d; touch /tmp/unhealthy) & %s", unhealthyAfter, script)
	}
	pod := shellPod(name, corev1.RestartPolicyAlways, script)
	pod.Spec.Containers[0].LivenessProbe = probe
	return pod
}

func restartedAtLeastOnce(t *T, name string) error {
	_, err := t.WaitPod(name, 2*time.Minute, "restartCount 1", func(p *corev1.Pod) error {
		if p == nil || len(p.Status.ContainerStatuses) == 0 || p.Status.ContainerStatuses[0].RestartCount < 1 {
			return errors.New("not restarted yet")
		}
		return nil
	})
	return err
}

// probeServerLiveness runs the probe-server with a liveness probe through
// handler. With unhealthy, the server turns unhealthy 6 s in and the
// container must be restarted; otherwise it stays healthy and must not be.
func probeServerLiveness(name string, handler corev1.ProbeHandler, unhealthy bool) func(*T) error {
	return func(t *T) error {
		after := 0
		if unhealthy {
			after = 6
		}
		name, err := t.Create(probeServer(name, after, &corev1.Probe{
			ProbeHandler: handler, InitialDelaySeconds: 2, PeriodSeconds: 1, FailureThreshold: 1, TimeoutSeconds: 1,
		}))
		if err != nil {
			return err
		}
		if unhealthy {
			return restartedAtLeastOnce(t, name)
		}
		if _, err := t.WaitPod(name, time.Minute, "running", running); err != nil {
			return err
		}
		// Ten periods of a healthy server: no restart.
		select {
		case <-t.Context().Done():
			return t.Context().Err()
		case <-time.After(10 * time.Second):
		}
		p, err := t.Pod(name)
		if err != nil {
			return err
		}
		if rc := p.Status.ContainerStatuses[0].RestartCount; rc != 0 {
			return fmt.Errorf("restartCount %d with a healthy liveness probe", rc)
		}
		return nil
	}
}

func startupProbeHoldsLiveness(t *T) error {
	// Liveness would fail for 8 s; the startup probe holds it off until
	// the file appears, so the container is never restarted.
	pod := shellPod("startup-holds", corev1.RestartPolicyAlways, "sleep 8; echo ok > /tmp/started; sleep 600")
	file := func(path string) corev1.ProbeHandler {
		return corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"cat", path}}}
	}
	pod.Spec.Containers[0].StartupProbe = &corev1.Probe{ProbeHandler: file("/tmp/started"), PeriodSeconds: 1, FailureThreshold: 30}
	pod.Spec.Containers[0].LivenessProbe = &corev1.Probe{ProbeHandler: file("/tmp/started"), PeriodSeconds: 1, FailureThreshold: 1}
	name, err := t.Create(pod)
	if err != nil {
		return err
	}
	p, err := t.WaitPod(name, time.Minute, "started", func(p *corev1.Pod) error {
		if p == nil || len(p.Status.ContainerStatuses) == 0 || p.Status.ContainerStatuses[0].Started == nil || !*p.Status.ContainerStatuses[0].Started {
			return errors.New("startup probe not passed yet")
		}
		return nil
	})
	if err != nil {
		return err
	}
	if rc := p.Status.ContainerStatuses[0].RestartCount; rc != 0 {
		return fmt.Errorf("restartCount %d: liveness ran before the startup probe passed", rc)
	}
	return nil
}
