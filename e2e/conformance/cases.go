package conformance

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Cases are the suite, in the order they are listed. Names are the
// kubelet's test names (Describe path and It), with their tags.
func Cases() []Case {
	return []Case{
		{Name: "[sig-node] Pods should get a host IP [NodeConformance] [Conformance]", Run: podsGetAHostIP},
		{Name: "[sig-node] Container Runtime blackbox test when starting a container that exits should run with the expected status [NodeConformance] [Conformance]", Run: containerExitsWithExpectedStatus},
		{Name: "[sig-node] Container Runtime blackbox test on terminated container should report termination message from file when pod succeeds and FallbackToLogsOnError is set [NodeConformance] [Conformance]", Run: terminationMessageFromFile},
		{Name: "[sig-node] Container Runtime blackbox test on terminated container should report termination message from log output if TerminationMessagePolicy FallbackToLogsOnError is set [NodeConformance] [Conformance]", Run: terminationMessageFromLogs},
		{Name: "[sig-node] Container Runtime blackbox test on terminated container should report termination message if TerminationMessagePath is set as non-root user and at a non-default path [NodeConformance] [Conformance]", Run: terminationMessageNonRootCustomPath},
		{Name: "[sig-node] Container Runtime blackbox test on terminated container should report termination message as empty when pod succeeds and FallbackToLogsOnError is set [NodeConformance] [Conformance]", Run: terminationMessageEmptyOnSuccess},
		{Name: "[sig-node] Pods should allow activeDeadlineSeconds to end the pod (Failed, DeadlineExceeded) [NodeConformance]", Run: activeDeadlineExceeded},
		{Name: "[sig-node] Kubelet when scheduling a busybox command in a pod should print the output to logs [NodeConformance] [Conformance]", Run: busyboxPrintsToLogs},
		{Name: "[sig-node] Kubelet when scheduling a busybox command that always fails in a pod should have an terminated reason [NodeConformance] [Conformance]", Run: alwaysFailingHasTerminatedReason},
		{Name: "[sig-node] Kubelet when scheduling a read only busybox container should not write to root filesystem [LinuxOnly] [NodeConformance] [Conformance]", Run: readOnlyRootFilesystem},
		{Name: "[sig-node] Kubelet when scheduling a busybox Pod with hostAliases should write entries to /etc/hosts [NodeConformance] [Conformance]", Run: hostAliasesInEtcHosts},
		{Name: "[sig-node] KubeletManagedEtcHosts should test kubelet managed /etc/hosts file [LinuxOnly] [NodeConformance] [Conformance]", Run: managedEtcHosts},
		{Name: "[sig-node] Pods should set the pod's hostname from spec.hostname [NodeConformance]", Run: podHostname},
		{Name: "[sig-node] Variable Expansion should allow composing env vars into new env vars [NodeConformance] [Conformance]", Run: composedEnvVars},
		{Name: "[sig-node] Downward API should provide pod name, namespace and IP address as env vars [NodeConformance] [Conformance]", Run: downwardAPIEnv},
		{Name: "[sig-node] InitContainer [NodeConformance] should invoke init containers on a RestartNever pod [Conformance]", Run: initContainersOnRestartNever},
		{Name: "[sig-node] InitContainer [NodeConformance] should not start app containers and fail the pod if init containers fail on a RestartNever pod [Conformance]", Run: failingInitFailsThePod},
		{Name: "[sig-node] InitContainer [NodeConformance] should invoke init containers on a RestartAlways pod [Conformance]", Run: initContainersOnRestartAlways},
		{Name: "[sig-node] InitContainer [NodeConformance] should not start app containers if init containers fail on a RestartAlways pod [Conformance]", Run: failingInitOnRestartAlwaysKeepsAppDown},
		{Name: "[sig-node] Containers Lifecycle [NodeConformance] a restartable init container (sidecar) should be started before the regular container starts", Run: sidecarStartsBeforeTheApp},
		{Name: "[sig-node] Containers Lifecycle [NodeConformance] a pod with restartable init containers (sidecars) should terminate sidecars in reverse order after all main containers have exited", Run: sidecarsTerminateInReverseOrder},
		{Name: "[sig-node] Probing container should be restarted with a exec \"cat /tmp/health\" liveness probe [NodeConformance] [Conformance]", Run: execLivenessRestarts},
		{Name: "[sig-node] Probing container should be restarted with a /healthz http liveness probe [NodeConformance] [Conformance]", Run: probeServerLiveness("liveness-http", corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)}}, true)},
		{Name: "[sig-node] Probing container should *not* be restarted with a tcp:8080 liveness probe [NodeConformance] [Conformance]", Run: probeServerLiveness("liveness-tcp", corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(8081)}}, false)},
		{Name: "[sig-node] Probing container should be restarted with a GRPC liveness probe [NodeConformance] [Conformance]", Run: probeServerLiveness("liveness-grpc", corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: 8082}}, true)},
		{Name: "[sig-node] Probing container should *not* be restarted by liveness probe because startup probe delays it [NodeConformance]", Run: startupProbeHoldsLiveness},
		{Name: "[sig-node] Probing container with readiness probe should not be ready before initial delay and never restart [NodeConformance] [Conformance]", Run: readinessWaitsForInitialDelay},
		{Name: "[sig-node] Container Lifecycle Hook when create a pod with lifecycle hook should execute poststart exec hook properly [NodeConformance] [Conformance]", Run: postStartExecHook},
		{Name: "[sig-node] Container Lifecycle Hook when create a pod with lifecycle hook should execute prestop exec hook properly [NodeConformance] [Conformance]", Run: preStopExecHook},
		{Name: "[sig-node] Container Lifecycle Hook when create a pod with lifecycle hook should execute poststart http hook properly [NodeConformance] [Conformance]", Run: httpHook("poststart")},
		{Name: "[sig-node] Container Lifecycle Hook when create a pod with lifecycle hook should execute prestop http hook properly [NodeConformance] [Conformance]", Run: httpHook("prestop")},
		{Name: "[sig-node] Kubelet Cgroup Manager QOS containers On enabling QOS cgroup hierarchy Top level QoS containers should have been created [NodeConformance]", Run: topLevelQoSCgroups},
		{Name: "[sig-node] Kubelet Cgroup Manager Pod containers On scheduling a Guaranteed, Burstable and BestEffort Pod Pod containers should have been created under their QoS cgroup [NodeConformance]", Run: podCgroupsUnderTheirQoS},
		{Name: "[sig-node] Kubelet Cgroup Manager Pod containers On scheduling a Burstable Pod the pod cgroup should have the kubelet's cpu shares, quota and memory limit [NodeConformance]", Run: qosCgroupValues},
		{Name: "[sig-node] OOMKiller [LinuxOnly] [NodeConformance] The containers terminated by OOM killer should have the reason set to OOMKilled", Run: oomKilledReason},
		{Name: "[sig-node] MemoryAllocatableEviction [Slow] [Serial] [Disruptive] [NodeFeature:Eviction] when we run containers that should cause MemoryPressure should eventually evict all of the correct pods", Run: memoryAllocatableEviction, Serial: true},
		{Name: "[sig-node] PriorityMemoryEvictionOrdering [Slow] [Serial] [Disruptive] [NodeFeature:Eviction] when we run containers that should cause MemoryPressure should eventually evict all of the correct pods", Run: priorityMemoryEvictionOrdering, Serial: true},
	}
}

// Pod builders.

func shellPod(name string, policy corev1.RestartPolicy, script string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PodSpec{RestartPolicy: policy, Containers: []corev1.Container{{
			Name: "main", Command: []string{"sh", "-c", script},
		}}},
	}
}

func running(p *corev1.Pod) error {
	if p == nil {
		return errors.New("not listed yet")
	}
	if p.Status.Phase != corev1.PodRunning {
		return fmt.Errorf("phase %s", p.Status.Phase)
	}
	return nil
}

func phase(want corev1.PodPhase) func(*corev1.Pod) error {
	return func(p *corev1.Pod) error {
		if p == nil {
			return errors.New("not listed yet")
		}
		if p.Status.Phase != want {
			return fmt.Errorf("phase %s, want %s", p.Status.Phase, want)
		}
		return nil
	}
}

func containerStatus(p *corev1.Pod, name string) *corev1.ContainerStatus {
	for _, list := range [][]corev1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses} {
		for i := range list {
			if list[i].Name == name {
				return &list[i]
			}
		}
	}
	return nil
}

// logsContain waits until the container's log holds want.
func logsContain(t *T, listed, container, want string, timeout time.Duration) error {
	_, err := t.WaitPod(listed, timeout, fmt.Sprintf("%q in the log of %s", want, container), func(p *corev1.Pod) error {
		if p == nil {
			return errors.New("not listed yet")
		}
		logs, err := t.Logs(p, container)
		if err != nil {
			return err
		}
		if !strings.Contains(logs, want) {
			return fmt.Errorf("log so far: %q", logs)
		}
		return nil
	})
	return err
}

// The cases.

func podsGetAHostIP(t *T) error {
	name, err := t.Create(shellPod("host-ip", corev1.RestartPolicyNever, "sleep 600"))
	if err != nil {
		return err
	}
	p, err := t.WaitPod(name, time.Minute, "running", running)
	if err != nil {
		return err
	}
	if net.ParseIP(p.Status.HostIP) == nil {
		return fmt.Errorf("status.hostIP %q is not an IP", p.Status.HostIP)
	}
	if len(p.Status.HostIPs) == 0 || p.Status.HostIPs[0].IP != p.Status.HostIP {
		return fmt.Errorf("status.hostIPs %v does not start with hostIP %s", p.Status.HostIPs, p.Status.HostIP)
	}
	if net.ParseIP(p.Status.PodIP) == nil {
		return fmt.Errorf("status.podIP %q is not an IP", p.Status.PodIP)
	}
	return nil
}

func containerExitsWithExpectedStatus(t *T) error {
	for _, tc := range []struct {
		policy   corev1.RestartPolicy
		phase    corev1.PodPhase
		restarts bool
	}{
		{corev1.RestartPolicyAlways, corev1.PodRunning, true},
		{corev1.RestartPolicyOnFailure, corev1.PodRunning, true},
		{corev1.RestartPolicyNever, corev1.PodFailed, false},
	} {
		name, err := t.Create(shellPod("exits-"+strings.ToLower(string(tc.policy)), tc.policy, "exit 1"))
		if err != nil {
			return err
		}
		_, err = t.WaitPod(name, 90*time.Second, fmt.Sprintf("restartPolicy %s: phase %s, restarted %v", tc.policy, tc.phase, tc.restarts), func(p *corev1.Pod) error {
			if p == nil || len(p.Status.ContainerStatuses) == 0 {
				return errors.New("no container status yet")
			}
			cs := p.Status.ContainerStatuses[0]
			if tc.restarts && cs.RestartCount < 1 {
				return fmt.Errorf("restartCount %d", cs.RestartCount)
			}
			if !tc.restarts && (cs.State.Terminated == nil || p.Status.Phase != tc.phase) {
				return fmt.Errorf("phase %s, state %+v", p.Status.Phase, cs.State)
			}
			if tc.restarts && p.Status.Phase != tc.phase {
				return fmt.Errorf("phase %s, want %s", p.Status.Phase, tc.phase)
			}
			if cs.Ready {
				return errors.New("a container that exits is reported ready")
			}
			return nil
		})
		if err != nil {
			return err
		}
		if !tc.restarts {
			p, _ := t.Pod(name)
			if rc := p.Status.ContainerStatuses[0].RestartCount; rc != 0 {
				return fmt.Errorf("restartPolicy Never: restartCount %d", rc)
			}
		}
	}
	return nil
}

func terminationMessage(t *T, pod *corev1.Pod, want corev1.PodPhase, message string) error {
	pod.Spec.Containers[0].TerminationMessagePolicy = corev1.TerminationMessageFallbackToLogsOnError
	name, err := t.Create(pod)
	if err != nil {
		return err
	}
	p, err := t.WaitPod(name, time.Minute, "phase "+string(want), phase(want))
	if err != nil {
		return err
	}
	cs := p.Status.ContainerStatuses[0]
	if cs.State.Terminated == nil || cs.State.Terminated.Message != message {
		return fmt.Errorf("termination state %+v, want message %q", cs.State.Terminated, message)
	}
	return nil
}

func terminationMessageFromFile(t *T) error {
	return terminationMessage(t, shellPod("term-file", corev1.RestartPolicyNever, "echo -n OK > /dev/termination-log"), corev1.PodSucceeded, "OK")
}

func terminationMessageFromLogs(t *T) error {
	return terminationMessage(t, shellPod("term-logs", corev1.RestartPolicyNever, "echo -n DONE; exit 1"), corev1.PodFailed, "DONE")
}

func busyboxPrintsToLogs(t *T) error {
	name, err := t.Create(shellPod("busybox-logs", corev1.RestartPolicyNever, "echo 'Hello World'; sleep 600"))
	if err != nil {
		return err
	}
	return logsContain(t, name, "main", "Hello World", time.Minute)
}

func alwaysFailingHasTerminatedReason(t *T) error {
	pod := shellPod("bin-false", corev1.RestartPolicyNever, "")
	pod.Spec.Containers[0].Command = []string{"/bin/false"}
	name, err := t.Create(pod)
	if err != nil {
		return err
	}
	p, err := t.WaitPod(name, time.Minute, "phase Failed", phase(corev1.PodFailed))
	if err != nil {
		return err
	}
	term := p.Status.ContainerStatuses[0].State.Terminated
	if term == nil || term.Reason != "Error" || term.ExitCode != 1 {
		return fmt.Errorf("terminated state %+v, want reason Error and exit code 1", term)
	}
	return nil
}

func readOnlyRootFilesystem(t *T) error {
	pod := shellPod("read-only-root", corev1.RestartPolicyNever, "echo test > /file; sleep 600")
	yes := true
	pod.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{ReadOnlyRootFilesystem: &yes}
	name, err := t.Create(pod)
	if err != nil {
		return err
	}
	return logsContain(t, name, "main", "Read-only file system", time.Minute)
}

func hostAliasesInEtcHosts(t *T) error {
	pod := shellPod("host-aliases", corev1.RestartPolicyNever, "cat /etc/hosts; sleep 600")
	pod.Spec.HostAliases = []corev1.HostAlias{{IP: "123.45.67.89", Hostnames: []string{"foo", "bar"}}}
	name, err := t.Create(pod)
	if err != nil {
		return err
	}
	return logsContain(t, name, "main", "123.45.67.89\tfoo\tbar", time.Minute)
}

func composedEnvVars(t *T) error {
	pod := shellPod("env-compose", corev1.RestartPolicyNever, "env; sleep 600")
	pod.Spec.Containers[0].Env = []corev1.EnvVar{
		{Name: "FOO", Value: "foo-value"}, {Name: "BAR", Value: "bar-value"}, {Name: "FOOBAR", Value: "$(FOO);;$(BAR)"},
	}
	name, err := t.Create(pod)
	if err != nil {
		return err
	}
	return logsContain(t, name, "main", "FOOBAR=foo-value;;bar-value", time.Minute)
}

func downwardAPIEnv(t *T) error {
	pod := shellPod("downward-env", corev1.RestartPolicyNever, "env; sleep 600")
	field := func(path string) *corev1.EnvVarSource {
		return &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}
	}
	pod.Spec.Containers[0].Env = []corev1.EnvVar{
		{Name: "POD_NAME", ValueFrom: field("metadata.name")},
		{Name: "POD_NAMESPACE", ValueFrom: field("metadata.namespace")},
		{Name: "POD_IP", ValueFrom: field("status.podIP")},
	}
	name, err := t.Create(pod)
	if err != nil {
		return err
	}
	p, err := t.WaitPod(name, time.Minute, "running", running)
	if err != nil {
		return err
	}
	for _, want := range []string{"POD_NAME=" + p.Name, "POD_NAMESPACE=default", "POD_IP=" + p.Status.PodIP} {
		if err := logsContain(t, name, "main", want, 30*time.Second); err != nil {
			return err
		}
	}
	return nil
}

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

func postStartExecHook(t *T) error {
	pod := shellPod("poststart-exec", corev1.RestartPolicyNever, "while [ ! -f /hook/poststart ]; do sleep 0.1; done; cat /hook/poststart; sleep 600")
	pod.Spec.Volumes = []corev1.Volume{{Name: "hook", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "hook", MountPath: "/hook"}}
	pod.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{PostStart: &corev1.LifecycleHandler{
		Exec: &corev1.ExecAction{Command: []string{"sh", "-c", "echo poststart-ran > /hook/poststart"}}}}
	name, err := t.Create(pod)
	if err != nil {
		return err
	}
	return logsContain(t, name, "main", "poststart-ran", time.Minute)
}

// outMount mounts the volume withHostOut adds at /out.
var outMount = []corev1.VolumeMount{{Name: "out", MountPath: "/out"}}

// withHostOut gives the pod a volume "out" on a fresh host directory,
// writable by any user and removed when the case ends, for what its
// containers leave behind them (the pod's own volumes go with it).
func withHostOut(t *T, pod *corev1.Pod) (string, error) {
	dir, err := os.MkdirTemp("", "nodeagent-conformance-"+pod.Name+"-")
	if err != nil {
		return "", err
	}
	os.Chmod(dir, 0o777)
	t.Defer(func(context.Context) error { return os.RemoveAll(dir) })
	pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: "out", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: dir}}})
	return dir, nil
}

func preStopExecHook(t *T) error {
	// The hook writes into a host directory the suite reads after the pod
	// is gone (the kubelet's test has a server pod record the call).
	pod := shellPod("prestop-exec", corev1.RestartPolicyNever, "sleep 600")
	dir, err := withHostOut(t, pod)
	if err != nil {
		return err
	}
	pod.Spec.Containers[0].VolumeMounts = outMount
	pod.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{
		Exec: &corev1.ExecAction{Command: []string{"sh", "-c", "echo prestop-ran > /out/prestop"}}}}
	name, err := t.Create(pod)
	if err != nil {
		return err
	}
	if _, err := t.WaitPod(name, time.Minute, "running", running); err != nil {
		return err
	}
	if err := t.Delete(name); err != nil {
		return err
	}
	got, err := os.ReadFile(filepath.Join(dir, "prestop"))
	if err != nil || strings.TrimSpace(string(got)) != "prestop-ran" {
		return fmt.Errorf("the preStop hook left %q (%v), want prestop-ran", got, err)
	}
	return nil
}

// httpHook runs a postStart or preStop httpGet hook against a handler pod
// (the probe-server, which logs each /record/ call with its user agent),
// as the kubelet's test does with its handler pod.
func httpHook(stage string) func(*T) error {
	return func(t *T) error {
		handler, err := t.Create(probeServer("hook-handler-"+stage, 0, nil))
		if err != nil {
			return err
		}
		h, err := t.WaitPod(handler, time.Minute, "running with a pod IP", func(p *corev1.Pod) error {
			if err := running(p); err != nil {
				return err
			}
			if p.Status.PodIP == "" {
				return errors.New("no pod IP yet")
			}
			return nil
		})
		if err != nil {
			return err
		}
		action := &corev1.LifecycleHandler{HTTPGet: &corev1.HTTPGetAction{
			Host: h.Status.PodIP, Port: intstr.FromInt32(8080), Path: "/record/" + stage + "-http"}}
		pod := shellPod(stage+"-http", corev1.RestartPolicyNever, "sleep 600")
		pod.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{}
		if stage == "poststart" {
			pod.Spec.Containers[0].Lifecycle.PostStart = action
		} else {
			pod.Spec.Containers[0].Lifecycle.PreStop = action
		}
		name, err := t.Create(pod)
		if err != nil {
			return err
		}
		if _, err := t.WaitPod(name, time.Minute, "running", running); err != nil {
			return err
		}
		if stage == "prestop" {
			if err := t.Delete(name); err != nil {
				return err
			}
		}
		if err := logsContain(t, handler, "main", fmt.Sprintf("recorded %q from", stage+"-http"), time.Minute); err != nil {
			return err
		}
		return logsContain(t, handler, "main", "(kube-lifecycle/", 10*time.Second)
	}
}

func topLevelQoSCgroups(t *T) error {
	n := t.Node()
	if !n.PerQOS {
		return errors.New("cgroupsPerQOS is off on this node: no QoS cgroups to check")
	}
	if n.Kubepods == "" {
		return errors.New("the node does not say where kubepods is (annotation nodeagent.io/kubepods)")
	}
	for _, qos := range []string{"burstable", "besteffort"} {
		if fi, err := os.Stat(filepath.Join(n.Kubepods, qos)); err != nil || !fi.IsDir() {
			return fmt.Errorf("QoS cgroup %s: %v", qos, err)
		}
	}
	return nil
}

func podCgroupsUnderTheirQoS(t *T) error {
	n := t.Node()
	if n.Kubepods == "" {
		return errors.New("the node does not say where kubepods is (annotation nodeagent.io/kubepods)")
	}
	limits := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")}
	requests := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("32Mi")}
	for _, tc := range []struct {
		qos, parent string
		res         corev1.ResourceRequirements
	}{
		{"guaranteed", "", corev1.ResourceRequirements{Limits: limits, Requests: limits}},
		{"burstable", "burstable", corev1.ResourceRequirements{Limits: limits, Requests: requests}},
		{"besteffort", "besteffort", corev1.ResourceRequirements{}},
	} {
		pod := shellPod("cgroup-"+tc.qos, corev1.RestartPolicyNever, "sleep 600")
		pod.Spec.Containers[0].Resources = tc.res
		name, err := t.Create(pod)
		if err != nil {
			return err
		}
		p, err := t.WaitPod(name, time.Minute, "running", running)
		if err != nil {
			return err
		}
		dir := filepath.Join(n.Kubepods, tc.parent, "pod"+string(p.UID))
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			return fmt.Errorf("%s pod: no cgroup %s: %v", tc.qos, dir, err)
		}
		if err := t.Delete(name); err != nil {
			return err
		}
		if err := poll(t.Context(), 30*time.Second, "pod cgroup "+dir+" removed", func() error {
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				return fmt.Errorf("still there (%v)", err)
			}
			return nil
		}); err != nil {
			return err
		}
	}
	return nil
}

func oomKilledReason(t *T) error {
	pod := shellPod("oomkill", corev1.RestartPolicyNever, "dd if=/dev/zero of=/dev/null bs=20M")
	pod.Spec.Containers[0].Resources = corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("15Mi")}}
	name, err := t.Create(pod)
	if err != nil {
		return err
	}
	p, err := t.WaitPod(name, time.Minute, "phase Failed", phase(corev1.PodFailed))
	if err != nil {
		return err
	}
	term := p.Status.ContainerStatuses[0].State.Terminated
	if term == nil || term.ExitCode != 137 || term.Reason != "OOMKilled" {
		return fmt.Errorf("terminated %+v, want exit code 137 and reason OOMKilled", term)
	}
	return nil
}

func terminationMessageNonRootCustomPath(t *T) error {
	pod := shellPod("term-nonroot", corev1.RestartPolicyNever, "echo -n DONE > /dev/termination-custom-log")
	uid := int64(1000)
	pod.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{RunAsUser: &uid}
	pod.Spec.Containers[0].TerminationMessagePath = "/dev/termination-custom-log"
	name, err := t.Create(pod)
	if err != nil {
		return err
	}
	p, err := t.WaitPod(name, time.Minute, "phase Succeeded", phase(corev1.PodSucceeded))
	if err != nil {
		return err
	}
	if term := p.Status.ContainerStatuses[0].State.Terminated; term == nil || term.Message != "DONE" {
		return fmt.Errorf("terminated %+v, want message DONE written by uid 1000", term)
	}
	return nil
}

func managedEtcHosts(t *T) error {
	managed := shellPod("etc-hosts", corev1.RestartPolicyNever, "cat /etc/hosts; sleep 600")
	name, err := t.Create(managed)
	if err != nil {
		return err
	}
	p, err := t.WaitPod(name, time.Minute, "running", running)
	if err != nil {
		return err
	}
	// The kubelet's test: managed means the file starts with this line
	// (a hostNetwork pod's copy of the node's file says "(host network)").
	const managedHeader = "# Kubernetes-managed hosts file."
	for _, want := range []string{managedHeader, p.Status.PodIP + "\t" + p.Name} {
		if err := logsContain(t, name, "main", want, 30*time.Second); err != nil {
			return fmt.Errorf("pod network: %w", err)
		}
	}
	host := shellPod("etc-hosts-hostnet", corev1.RestartPolicyNever, "cat /etc/hosts; echo END; sleep 600")
	host.Spec.HostNetwork = true
	name, err = t.Create(host)
	if err != nil {
		return err
	}
	if err := logsContain(t, name, "main", "END", time.Minute); err != nil {
		return err
	}
	p, _ = t.Pod(name)
	logs, err := t.Logs(p, "main")
	if err != nil {
		return err
	}
	if strings.HasPrefix(logs, managedHeader) {
		return fmt.Errorf("a hostNetwork pod got a managed /etc/hosts:\n%s", logs)
	}
	return nil
}

func podHostname(t *T) error {
	pod := shellPod("hostname", corev1.RestartPolicyNever, "hostname; sleep 600")
	pod.Spec.Hostname = "custom-host"
	name, err := t.Create(pod)
	if err != nil {
		return err
	}
	return logsContain(t, name, "main", "custom-host", time.Minute)
}

func qosCgroupValues(t *T) error {
	n := t.Node()
	if n.Kubepods == "" {
		return errors.New("the node does not say where kubepods is (annotation nodeagent.io/kubepods)")
	}
	pod := shellPod("cgroup-values", corev1.RestartPolicyNever, "sleep 600")
	pod.Spec.Containers[0].Resources = corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("200m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
	}
	name, err := t.Create(pod)
	if err != nil {
		return err
	}
	p, err := t.WaitPod(name, time.Minute, "running", running)
	if err != nil {
		return err
	}
	dir := filepath.Join(n.Kubepods, "burstable", "pod"+string(p.UID))
	// The kubelet's values: shares = 100m × 1024 / 1000; quota = 200m of
	// a 100 ms period; memory = the limit. On v2 the shares become
	// cpu.weight 1 + (102 − 2) × 9999 / 262142 = 4.
	want := map[string]string{}
	if n.CgroupV2 {
		want[filepath.Join(dir, "cpu.weight")] = "4"
		want[filepath.Join(dir, "cpu.max")] = "20000 100000"
		want[filepath.Join(dir, "memory.max")] = "134217728"
	} else {
		cpu := strings.Replace(dir, "/memory/", "/cpu/", 1)
		want[filepath.Join(cpu, "cpu.shares")] = "102"
		want[filepath.Join(cpu, "cpu.cfs_quota_us")] = "20000"
		want[filepath.Join(dir, "memory.limit_in_bytes")] = "134217728"
	}
	for file, value := range want {
		got, err := os.ReadFile(file)
		if err != nil {
			return err
		}
		if strings.TrimSpace(string(got)) != value {
			return fmt.Errorf("%s = %q, want %q", file, strings.TrimSpace(string(got)), value)
		}
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

func terminationMessageEmptyOnSuccess(t *T) error {
	return terminationMessage(t, shellPod("term-empty", corev1.RestartPolicyNever, "echo -n DONE"), corev1.PodSucceeded, "")
}

func activeDeadlineExceeded(t *T) error {
	pod := shellPod("deadline", corev1.RestartPolicyNever, "sleep 600")
	deadline := int64(5)
	pod.Spec.ActiveDeadlineSeconds = &deadline
	name, err := t.Create(pod)
	if err != nil {
		return err
	}
	p, err := t.WaitPod(name, time.Minute, "phase Failed", phase(corev1.PodFailed))
	if err != nil {
		return err
	}
	if p.Status.Reason != "DeadlineExceeded" {
		return fmt.Errorf("reason %q, want DeadlineExceeded", p.Status.Reason)
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
