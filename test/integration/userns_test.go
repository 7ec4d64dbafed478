//go:build integration

package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// usernsPod is a pod in a user namespace (hostUsers: false) with an
// emptyDir and a second container that unmasks /proc.
func usernsPod(name string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
spec:
  terminationGracePeriodSeconds: 2
  hostUsers: false
  volumes: [{name: scratch, emptyDir: {}}]
  containers:
  - name: main
    image: %s
    command: ["sleep", "3600"]
    volumeMounts: [{name: scratch, mountPath: /scratch}]
  - name: unmasked
    image: %[2]s
    command: ["sleep", "3600"]
    securityContext: {procMount: Unmasked}
`, name, testImage)
}

// uidMap is a container's /proc/self/uid_map as host ID and length of
// the mapping of its root.
func (n *node) uidMap(p *corev1.Pod, container string) (host, length uint64) {
	n.t.Helper()
	out, code := n.execIn(p, container, "cat", "/proc/self/uid_map")
	f := strings.Fields(out)
	if code != 0 || len(f) != 3 || f[0] != "0" {
		n.t.Fatalf("%s/%s: /proc/self/uid_map = %q (exit %d), want one mapping of root", p.Name, container, out, code)
	}
	host, _ = strconv.ParseUint(f[1], 10, 32)
	length, _ = strconv.ParseUint(f[2], 10, 32)
	return host, length
}

// Pods with hostUsers: false each run in a user namespace of their own: a
// 64 Ki range of host IDs, never the host's root, not shared, kept across
// an agent restart and given back when the pod goes. Only such a pod may
// unmask /proc.
func TestUserNamespacedPods(t *testing.T) {
	n := newNode(t, "")
	n.writeManifest("a.yaml", usernsPod("userns-a"))
	n.writeManifest("b.yaml", usernsPod("userns-b"))
	n.writeManifest("host.yaml", podManifest("host-users", ""))
	n.start()
	a, b := n.waitRunning("userns-a"), n.waitRunning("userns-b")

	hostA, lenA := n.uidMap(a, "main")
	hostB, lenB := n.uidMap(b, "main")
	for _, m := range [][2]uint64{{hostA, lenA}, {hostB, lenB}} {
		if m[1] != 65536 || m[0] < 65536 || m[0]%65536 != 0 {
			t.Errorf("mapping 0 -> %d (%d IDs): want a 64 Ki range from a multiple of 65536 above the host's first", m[0], m[1])
		}
	}
	if hostA == hostB {
		t.Errorf("two pods share host IDs from %d", hostA)
	}
	if h, _ := n.uidMap(a, "unmasked"); h != hostA {
		t.Errorf("the pod's containers differ: %d and %d", hostA, h)
	}
	out, _ := n.execIn(n.waitRunning("host-users"), "main", "cat", "/proc/self/uid_map")
	if f := strings.Fields(out); len(f) != 3 || f[1] != "0" || f[2] != "4294967295" {
		t.Errorf("a pod without hostUsers: false: uid_map %q, want the host's", out)
	}

	// Root inside, with volumes that work.
	if out, _ := n.execIn(a, "main", "id", "-u"); strings.TrimSpace(out) != "0" {
		t.Errorf("id -u = %q, want root inside", out)
	}
	if out, code := n.execIn(a, "main", "sh", "-c", "echo ok > /scratch/f && cat /scratch/f"); code != 0 || strings.TrimSpace(out) != "ok" {
		t.Errorf("emptyDir in a user namespace: %q (exit %d)", out, code)
	}
	// The volume is idmapped: what the pod's root writes is host root's on
	// disk, as the kubelet asks of the runtime.
	scratch := filepath.Join(n.agent.RootDir, "pods", string(a.UID), "volumes", "kubernetes.io~empty-dir", "scratch", "f")
	if st, err := os.Stat(scratch); err != nil || st.Sys().(*syscall.Stat_t).Uid != 0 {
		t.Errorf("%s: %v, want it owned by host root through the idmapped mount", scratch, err)
	}
	// The kubelet's masked paths: over /proc/keys in main, not in unmasked.
	if out, _ := n.execIn(a, "main", "sh", "-c", "grep -c ' /proc/keys ' /proc/mounts"); strings.TrimSpace(out) == "0" {
		m, _ := n.execIn(a, "main", "cat", "/proc/mounts")
		t.Errorf("main: /proc/keys is not masked:\n%s", m)
	}
	if out, _ := n.execIn(a, "unmasked", "sh", "-c", "grep -c ' /proc/keys ' /proc/mounts"); strings.TrimSpace(out) != "0" {
		t.Errorf("procMount Unmasked: /proc/keys is masked (%s mounts)", strings.TrimSpace(out))
	}

	// The range is written down in the kubelet's file.
	file := filepath.Join(n.agent.RootDir, "pods", string(a.UID), "userns")
	data, err := os.ReadFile(file)
	if err != nil || !strings.Contains(string(data), fmt.Sprintf(`"hostId":%d,"containerId":0,"length":65536`, hostA)) {
		t.Errorf("%s: %q %v", file, data, err)
	}

	// A restarted agent keeps the pods as they run and hands their ranges
	// to no one else.
	if err := n.stop(); err != nil {
		t.Fatal(err)
	}
	n.writeManifest("c.yaml", usernsPod("userns-c"))
	n.start()
	c := n.waitRunning("userns-c")
	hostC, _ := n.uidMap(c, "main")
	if hostC == hostA || hostC == hostB {
		t.Errorf("after a restart a new pod got %d, a range in use (%d, %d)", hostC, hostA, hostB)
	}
	if a2 := n.waitRunning("userns-a"); a2.Status.ContainerStatuses[0].ContainerID != a.Status.ContainerStatuses[0].ContainerID {
		t.Errorf("userns-a was restarted with the agent")
	}

	// The kubelet's counters, of this agent's life: two user-namespaced
	// sandboxes, and a failed sync for the one whose command is missing.
	n.writeManifest("bad.yaml", strings.Replace(usernsPod("userns-bad"), `command: ["sleep", "3600"]`, `command: ["/no/such/command"]`, 1))
	n.waitPod("userns-bad", time.Minute, "a failed container start", func(p *corev1.Pod) error {
		if p == nil || len(p.Status.ContainerStatuses) == 0 {
			return fmt.Errorf("no status")
		}
		for _, cs := range p.Status.ContainerStatuses {
			if cs.Name == "main" && (cs.LastTerminationState.Terminated != nil || cs.State.Waiting != nil && strings.HasSuffix(cs.State.Waiting.Reason, "Error")) {
				return nil
			}
		}
		return fmt.Errorf("statuses %+v", p.Status.ContainerStatuses)
	})
	n.eventually("the started-pods counters", 10*time.Second, func() error {
		fams := n.scrape("/metrics")
		for name, want := range map[string]float64{"kubelet_started_user_namespaced_pods_total": 2, "kubelet_started_user_namespaced_pods_errors_total": 1, "kubelet_started_pods_total": 2} {
			if v, ok := metricValue(fams, name); !ok || v != want {
				return fmt.Errorf("%s = %v (present %v), want %v", name, v, ok, want)
			}
		}
		return nil
	})

	// A pod that goes gives its range back, file and all.
	n.removeManifest("a.yaml")
	n.waitGone("userns-a")
	n.eventually("the gone pod's range file removed", 30*time.Second, func() error {
		if _, err := os.Stat(file); !os.IsNotExist(err) {
			return fmt.Errorf("%s: %v", file, err)
		}
		return nil
	})
	if strings.Contains(n.logText(), "level=ERROR") {
		t.Errorf("agent logged errors:\n%s", n.logText())
	}
}
