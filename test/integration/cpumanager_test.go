//go:build integration

package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/cpuset"
)

// wholeCPU asks one whole CPU in a Guaranteed pod: the static policy
// pins its container.
const wholeCPU = "    resources: {limits: {cpu: \"1\", memory: 64Mi}}\n"

// cpusAllowed is where the container's processes may run, as the kernel
// says (Cpus_allowed_list of its first process).
func (n *node) cpusAllowed(p *corev1.Pod, qosDir, container string) (string, error) {
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name != container {
			continue
		}
		dir := n.cgroupRoot + "/kubepods/" + qosDir + "pod" + string(p.UID) + "/" + strings.TrimPrefix(cs.ContainerID, "containerd://")
		pids := cgroupPids(n.t, dir)
		if len(pids) == 0 {
			return "", fmt.Errorf("no process in %s", dir)
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pids[0]))
		if err != nil {
			return "", err
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
				return strings.TrimSpace(v), nil
			}
		}
		return "", fmt.Errorf("no Cpus_allowed_list for pid %d", pids[0])
	}
	return "", fmt.Errorf("no container %s in %+v", container, p.Status.ContainerStatuses)
}

func (n *node) waitCPUs(p *corev1.Pod, qosDir, container, want string) {
	n.t.Helper()
	n.eventually(fmt.Sprintf("container %s of %s on CPUs %s", container, p.Name, want), 30*time.Second, func() error {
		got, err := n.cpusAllowed(p, qosDir, container)
		if err == nil && got != want {
			err = fmt.Errorf("runs on %s", got)
		}
		return err
	})
}

// The static CPU manager, CPU 0 reserved: a Guaranteed container asking
// one CPU runs alone on CPU 1 without a CFS quota, every other container
// moves off it, a pod asking more than is free is refused in the kubelet's
// words, the assignment survives an agent SIGKILL and a static pod's
// manifest moved out and back, and the pool grows back when the pod goes
// or a pinned pod finishes.
func TestCPUManagerStaticExclusiveCPUs(t *testing.T) {
	b, err := os.ReadFile("/sys/devices/system/cpu/online")
	if err != nil {
		t.Fatal(err)
	}
	online, err := cpuset.Parse(strings.TrimSpace(string(b)))
	if err != nil || online.Size() < 2 || !online.Contains(0) || !online.Contains(1) {
		t.Skipf("needs CPUs 0 and 1 online (one reserved, one exclusive); this host has %q", b)
	}
	all, shared := online.String(), online.Difference(cpuset.New(1)).String()
	n := newNode(t, "cpuManagerPolicy: static\nreservedSystemCPUs: \"0\"\n")
	n.start()
	n.writeManifest("shared.yaml", podManifest("shared", ""))
	sharedPod := n.waitRunning("shared")
	n.waitCPUs(sharedPod, "besteffort/", "main", all)

	n.writeManifest("pinned.yaml", podManifest("pinned", wholeCPU))
	pinned := n.waitRunning("pinned")
	n.waitCPUs(pinned, "", "main", "1")
	n.waitCPUs(sharedPod, "besteffort/", "main", shared)
	podDir := n.cgroupRoot + "/kubepods/pod" + string(pinned.UID)
	for _, dir := range []string{podDir, podDir + "/" + strings.TrimPrefix(pinned.Status.ContainerStatuses[0].ContainerID, "containerd://")} {
		if q := cgroupValues(t, dir).CPUQuota; q >= 0 {
			t.Errorf("cgroup %s has CFS quota %d; exclusive CPUs have none", dir, q)
		}
	}
	if out, err := n.nodectl("get", "node", "-o", "wide"); err != nil || !strings.HasSuffix(strings.TrimSpace(out), " "+shared) {
		t.Errorf("nodectl get node -o wide does not show the shared pool %s: %v\n%s", shared, err, out)
	}
	if out, err := n.nodectl("describe", "pod", "pinned"); err != nil || !regexp.MustCompile(`Exclusive CPUs:\s+1\n`).MatchString(out) {
		t.Errorf("nodectl describe pod pinned does not show its exclusive CPU 1: %v\n%s", err, out)
	}
	// The kubelet's figures: the shared pool less the reserved CPU.
	metrics := n.metricFamilies()
	for name, want := range map[string]float64{"kubelet_cpu_manager_exclusive_cpu_allocation_count": 1,
		"kubelet_cpu_manager_shared_pool_size_millicores": float64(online.Size()-2) * 1000, "kubelet_cpu_manager_pinning_requests_total": 1} {
		if got, ok := metricValue(metrics, name); !ok || got != want {
			t.Errorf("%s = %v (present %v), want %v", name, got, ok, want)
		}
	}
	statePath := filepath.Join(n.agent.RootDir, "cpu_manager_state")
	entry := `"` + string(pinned.UID) + `":{"main":"1"}`
	if state, err := os.ReadFile(statePath); err != nil || !strings.Contains(string(state), entry) {
		t.Fatalf("cpu_manager_state: %s (%v)", state, err)
	}

	n.writeManifest("second.yaml", podManifest("second", wholeCPU))
	second := n.waitRejected("second")
	want := fmt.Sprintf("not enough cpus available to satisfy request: requested=1, available=%d", online.Size()-2)
	if online.Size() == 2 && (second.Status.Reason != "UnexpectedAdmissionError" || !strings.Contains(second.Status.Message, want)) {
		t.Errorf("second whole-CPU pod: reason %q message %q", second.Status.Reason, second.Status.Message)
	}
	n.removeManifest("second.yaml")

	// SIGKILL: the checkpoint, not a rebuild, puts the pod back on CPU 1.
	n.kill()
	n.start()
	n.waitRunning("pinned")
	n.writeManifest("later.yaml", podManifest("later", ""))
	later := n.waitRunning("later")
	n.waitCPUs(later, "besteffort/", "main", shared)
	n.waitCPUs(pinned, "", "main", "1")
	if strings.Contains(n.logText(), "checkpoint unreadable") {
		t.Errorf("the checkpoint did not read back after a SIGKILL:\n%s", n.logText())
	}

	// Out and back in at once: the same UID, pinned again.
	pinnedFile := filepath.Join(n.manifests, "pinned.yaml")
	if err := os.Rename(pinnedFile, filepath.Join(t.TempDir(), "pinned.yaml")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	n.writeManifest("pinned.yaml", podManifest("pinned", wholeCPU))
	n.eventually("pinned back, running again", 90*time.Second, func() error {
		p, err := n.pod("pinned")
		if err != nil || p == nil || len(p.Status.ContainerStatuses) == 0 || p.Status.ContainerStatuses[0].ContainerID == pinned.Status.ContainerStatuses[0].ContainerID {
			return fmt.Errorf("not restarted yet: %v %v", p, err)
		}
		pinned = p
		return nil
	})
	pinned = n.waitRunning("pinned")
	n.waitCPUs(pinned, "", "main", "1")
	n.waitCPUs(later, "besteffort/", "main", shared)

	n.removeManifest("pinned.yaml")
	n.waitGone("pinned")
	n.waitCPUs(sharedPod, "besteffort/", "main", all)

	// A pinned pod that finishes gives its CPU back though it stays listed.
	n.writeManifest("job.yaml", strings.NewReplacer("spec:\n", "spec:\n  restartPolicy: Never\n", `"3600"`, `"3"`).Replace(podManifest("job", wholeCPU)))
	job := n.waitPod("job", 60*time.Second, "succeeded", func(p *corev1.Pod) error {
		if p == nil || p.Status.Phase != corev1.PodSucceeded {
			return fmt.Errorf("not succeeded: %+v", p)
		}
		return nil
	})
	n.eventually("the finished pod's CPU back in the pool", 30*time.Second, func() error {
		state, err := os.ReadFile(statePath)
		if err == nil && strings.Contains(string(state), string(job.UID)) {
			err = fmt.Errorf("still assigned: %s", state)
		}
		return err
	})
	n.waitCPUs(later, "besteffort/", "main", all)
}
