//go:build integration

package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// pinnedPod is a Guaranteed pod whose container asks one whole CPU.
func pinnedPod(name string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: pinned
    image: %[2]s
    command: ["sleep", "3600"]
    resources: {limits: {cpu: "1", memory: 64Mi}}
`, name, testImage)
}

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

// The static CPU manager on a 2-CPU node, CPU 0 reserved: a Guaranteed
// container asking one CPU runs alone on CPU 1 without a CFS quota, every
// other container moves to CPU 0, a second such pod is refused in the
// kubelet's words, the assignment survives an agent SIGKILL, and the pool
// grows back when the pod goes.
func TestCPUManagerStaticExclusiveCPUs(t *testing.T) {
	if runtime.NumCPU() != 2 {
		t.Fatalf("this test is written for a 2-CPU node (one reserved, one exclusive); this host has %d", runtime.NumCPU())
	}
	n := newNode(t, "cpuManagerPolicy: static\nreservedSystemCPUs: \"0\"\n")
	n.start()
	n.writeManifest("shared.yaml", podManifest("shared", ""))
	shared := n.waitRunning("shared")
	n.waitCPUs(shared, "besteffort/", "main", "0-1")

	n.writeManifest("pinned.yaml", pinnedPod("pinned"))
	pinned := n.waitRunning("pinned")
	n.waitCPUs(pinned, "", "pinned", "1")
	n.waitCPUs(shared, "besteffort/", "main", "0")
	podDir := n.cgroupRoot + "/kubepods/pod" + string(pinned.UID)
	for _, dir := range []string{podDir, podDir + "/" + strings.TrimPrefix(pinned.Status.ContainerStatuses[containerIndex(pinned, "pinned")].ContainerID, "containerd://")} {
		if q := cgroupValues(t, dir).CPUQuota; q >= 0 {
			t.Errorf("cgroup %s has CFS quota %d; exclusive CPUs have none", dir, q)
		}
	}
	if out, err := n.nodectl("get", "node", "-o", "wide"); err != nil || !strings.HasSuffix(strings.TrimSpace(out), " 0") {
		t.Errorf("nodectl get node -o wide does not show the shared pool 0: %v\n%s", err, out)
	}
	if out, err := n.nodectl("describe", "pod", "pinned"); err != nil || !regexp.MustCompile(`Exclusive CPUs:\s+1\n`).MatchString(out) {
		t.Errorf("nodectl describe pod pinned does not show its exclusive CPU 1: %v\n%s", err, out)
	}
	metrics := n.metricFamilies()
	for name, want := range map[string]float64{"kubelet_cpu_manager_exclusive_cpu_allocation_count": 1,
		"kubelet_cpu_manager_shared_pool_size_millicores": 1000, "kubelet_cpu_manager_pinning_requests_total": 1} {
		if got, ok := metricValue(metrics, name); !ok || got != want {
			t.Errorf("%s = %v (present %v), want %v", name, got, ok, want)
		}
	}
	state, err := os.ReadFile(filepath.Join(n.agent.RootDir, "cpu_manager_state"))
	if err != nil || !strings.Contains(string(state), `"`+string(pinned.UID)+`":{"pinned":"1"}`) {
		t.Fatalf("cpu_manager_state: %s (%v)", state, err)
	}

	n.writeManifest("second.yaml", pinnedPod("second"))
	second := n.waitRejected("second")
	if second.Status.Reason != "UnexpectedAdmissionError" || !strings.Contains(second.Status.Message, "not enough cpus available to satisfy request: requested=1, available=0") {
		t.Errorf("second whole-CPU pod: reason %q message %q", second.Status.Reason, second.Status.Message)
	}
	n.removeManifest("second.yaml")

	n.kill()
	n.start()
	n.waitRunning("pinned")
	n.writeManifest("later.yaml", podManifest("later", ""))
	later := n.waitRunning("later")
	n.waitCPUs(later, "besteffort/", "main", "0")
	n.waitCPUs(pinned, "", "pinned", "1")

	n.removeManifest("pinned.yaml")
	n.waitGone("pinned")
	n.waitCPUs(shared, "besteffort/", "main", "0-1")
	n.waitCPUs(later, "besteffort/", "main", "0-1")
}

func containerIndex(p *corev1.Pod, name string) int {
	for i, cs := range p.Status.ContainerStatuses {
		if cs.Name == name {
			return i
		}
	}
	return -1
}
