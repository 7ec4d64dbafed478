package conformance

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Lifecycle hooks: postStart and preStop, exec and http.

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
