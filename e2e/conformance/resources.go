package conformance

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Resources: pod cgroup values and OOM kills.

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
