package conformance

import (
	"fmt"
	"net"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Pods: addresses, deadlines, logs, the root filesystem, /etc/hosts and the hostname.

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

func podHostname(t *T) error {
	pod := shellPod("hostname", corev1.RestartPolicyNever, "hostname; sleep 600")
	pod.Spec.Hostname = "custom-host"
	name, err := t.Create(pod)
	if err != nil {
		return err
	}
	return logsContain(t, name, "main", "custom-host", time.Minute)
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
