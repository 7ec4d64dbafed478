package conformance

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Cases are the suite, in the order they are listed. Names are the
// kubelet's test names (Describe path and It), with their tags.
func Cases() []Case {
	return []Case{
		{Name: "[sig-node] Pods should get a host IP [NodeConformance] [Conformance]", Run: podsGetAHostIP},
		{Name: "[sig-node] Pods should allow activeDeadlineSeconds to end the pod (Failed, DeadlineExceeded) [NodeConformance]", Run: activeDeadlineExceeded},
		{Name: "[sig-node] Kubelet when scheduling a busybox command in a pod should print the output to logs [NodeConformance] [Conformance]", Run: busyboxPrintsToLogs},
		{Name: "[sig-node] Kubelet when scheduling a busybox command that always fails in a pod should have an terminated reason [NodeConformance] [Conformance]", Run: alwaysFailingHasTerminatedReason},
		{Name: "[sig-node] Kubelet when scheduling a read only busybox container should not write to root filesystem [LinuxOnly] [NodeConformance] [Conformance]", Run: readOnlyRootFilesystem},
		{Name: "[sig-node] Kubelet when scheduling a busybox Pod with hostAliases should write entries to /etc/hosts [NodeConformance] [Conformance]", Run: hostAliasesInEtcHosts},
		{Name: "[sig-node] Pods should set the pod's hostname from spec.hostname [NodeConformance]", Run: podHostname},
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
