//go:build integration

package integration

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"nodeagent/cgroups"
)

// memTotal is the node's memory capacity (MemTotal).
func memTotal(t *testing.T) int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), "MemTotal:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb * 1024
		}
	}
	t.Fatal("no MemTotal")
	return 0
}

// oomFloor is the lowest oom_score_adj this host lets us set: -1000 with
// CAP_SYS_RESOURCE, else our current value.
func oomFloor(t *testing.T) int {
	status, _ := os.ReadFile("/proc/self/status")
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			bits, _ := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			if bits&(1<<24) != 0 {
				return -1000
			}
		}
	}
	b, _ := os.ReadFile("/proc/self/oom_score_adj")
	n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return n
}

// containerPID finds the first process of a container in its cgroup.
func containerPID(t *testing.T, podCgroup, containerID string) int {
	t.Helper()
	id := strings.TrimPrefix(containerID, "containerd://")
	pids := cgroupPids(t, podCgroup+"/"+id)
	if len(pids) == 0 {
		t.Fatalf("no process in container cgroup %s/%s", podCgroup, id)
	}
	return slices.Min(pids)
}

func TestQoSPodsRunInTheirCgroupsAndAreCleanedUp(t *testing.T) {
	n := newNode(t, "podPidsLimit: 512\nsystemReserved:\n  memory: 256Mi\nkubeReserved:\n  memory: 128Mi\n")
	hostPort := freePort(t)
	n.writeManifest("besteffort.yaml", fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: be
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: web
    image: %s
    command: ["sh", "-c", "echo hello-from-pod > /tmp/index.html && exec httpd -f -p 8080 -h /tmp"]
    ports: [{containerPort: 8080, hostPort: %d}]
`, testImage, hostPort))
	n.writeManifest("burstable.yaml", podManifest("bu", `    resources:
      requests: {cpu: 250m, memory: 64Mi}
      limits: {cpu: 500m, memory: 128Mi}
`))
	n.writeManifest("guaranteed.yaml", podManifest("gu", `    resources:
      limits: {cpu: 300m, memory: 96Mi}
`))
	n.start()

	kubepods := n.cgroupRoot + "/kubepods"
	_, podNet, _ := net.ParseCIDR("10.88.0.0/16")
	mem := memTotal(t)
	floor := oomFloor(t)
	// memory -1: unlimited.
	cases := []struct {
		name, qos, parent string
		shares            uint64
		quota, memory     int64
		adj               string
	}{
		{"be", "BestEffort", kubepods + "/besteffort", 2, -1, -1, "1000"},
		{"bu", "Burstable", kubepods + "/burstable", 256, 50000, 128 << 20,
			strconv.Itoa(max(3, min(999, 1000-int(1000*int64(64<<20)/mem))))},
		{"gu", "Guaranteed", kubepods, 307, 30000, 96 << 20, strconv.Itoa(max(-997, floor))},
	}
	memoryIs := func(v cgroups.Values, want int64) bool {
		if want < 0 {
			return unlimitedMemory(v)
		}
		return v.MemoryLimit == want
	}
	uids := map[string]string{}
	for _, tc := range cases {
		p := n.waitRunning(tc.name)
		uids[tc.name] = string(p.UID)
		if string(p.Status.QOSClass) != tc.qos {
			t.Errorf("%s: qosClass %s, want %s", tc.name, p.Status.QOSClass, tc.qos)
		}
		if ip := net.ParseIP(p.Status.PodIP); ip == nil || !podNet.Contains(ip) {
			t.Errorf("%s: podIP %q not from the bridge's 10.88.0.0/16", tc.name, p.Status.PodIP)
		}
		podCgroup := tc.parent + "/pod" + string(p.UID)
		v := cgroupValues(t, podCgroup)
		if got, want := cpuWeight(v), wantCPUWeight(t, tc.shares); got != want {
			t.Errorf("%s: pod CPU weight %d, want %d (shares %d)", tc.name, got, want, tc.shares)
		}
		if v.CPUQuota != tc.quota {
			t.Errorf("%s: pod CPU quota %d, want %d", tc.name, v.CPUQuota, tc.quota)
		}
		if !memoryIs(v, tc.memory) {
			t.Errorf("%s: pod memory limit %d, want %d", tc.name, v.MemoryLimit, tc.memory)
		}
		if v.PidsLimit != 512 {
			t.Errorf("%s: pod pids limit %d, want 512 (podPidsLimit)", tc.name, v.PidsLimit)
		}
		cid := p.Status.ContainerStatuses[0].ContainerID
		pid := containerPID(t, podCgroup, cid)
		adj, _ := os.ReadFile(fmt.Sprintf("/proc/%d/oom_score_adj", pid))
		if got := strings.TrimSpace(string(adj)); got != tc.adj {
			t.Errorf("%s: container oom_score_adj %s, want %s", tc.name, got, tc.adj)
		}
		// The container's own cgroup carries the CRI resources.
		ctrCgroup := podCgroup + "/" + strings.TrimPrefix(cid, "containerd://")
		if tc.name != "be" {
			cv := cgroupValues(t, ctrCgroup)
			if !memoryIs(cv, tc.memory) {
				t.Errorf("%s: container memory limit %d, want %d", tc.name, cv.MemoryLimit, tc.memory)
			}
			if cv.CPUQuota != tc.quota {
				t.Errorf("%s: container quota %d, want %d", tc.name, cv.CPUQuota, tc.quota)
			}
		}
	}

	// QoS level values and node allocatable.
	if got, want := cpuWeight(cgroupValues(t, kubepods+"/burstable")), wantCPUWeight(t, 256); got != want {
		t.Errorf("burstable CPU weight %d, want %d (Σ Burstable requests, 256 shares)", got, want)
	}
	if got, want := cpuWeight(cgroupValues(t, kubepods+"/besteffort")), wantCPUWeight(t, 2); got != want {
		t.Errorf("besteffort CPU weight %d, want %d", got, want)
	}
	if got, want := cgroupValues(t, kubepods).MemoryLimit, mem-(384<<20); got != want {
		t.Errorf("kubepods memory limit %d, want capacity - reserved = %d", got, want)
	}

	// The pod network really carries traffic, to the pod IP and through
	// the hostPort mapping.
	be, _ := n.pod("be")
	for _, addr := range []string{net.JoinHostPort(be.Status.PodIP, "8080"), net.JoinHostPort("127.0.0.1", strconv.Itoa(hostPort))} {
		resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + addr + "/")
		if err != nil {
			t.Fatalf("GET the BestEffort pod's httpd at %s: %v", addr, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.TrimSpace(string(body)) != "hello-from-pod" {
			t.Errorf("pod served %q at %s", body, addr)
		}
	}

	// Deleting the manifests removes everything.
	for _, f := range []string{"besteffort.yaml", "burstable.yaml", "guaranteed.yaml"} {
		n.removeManifest(f)
	}
	for _, tc := range cases {
		n.waitGone(tc.name)
		sbs, cs := n.runtimeObjects(uids[tc.name])
		if len(sbs) != 0 || len(cs) != 0 {
			t.Errorf("%s: runtime still holds %d sandboxes and %d containers", tc.name, len(sbs), len(cs))
		}
		if cgroupExists(t, tc.parent+"/pod"+uids[tc.name]) {
			t.Errorf("%s: pod cgroup %s left behind", tc.name, tc.parent+"/pod"+uids[tc.name])
		}
		if _, err := os.Stat(filepath.Join(n.dir, "logs")); err == nil {
			entries, _ := os.ReadDir(filepath.Join(n.dir, "logs"))
			for _, e := range entries {
				if strings.Contains(e.Name(), uids[tc.name]) {
					t.Errorf("%s: pod log directory %s left behind", tc.name, e.Name())
				}
			}
		}
	}
	if got, want := cpuWeight(cgroupValues(t, kubepods+"/burstable")), wantCPUWeight(t, 2); got != want {
		t.Errorf("burstable CPU weight after deletion %d, want %d", got, want)
	}
}

func TestBadManifestsLeaveGoodPodsRunning(t *testing.T) {
	n := newNode(t, "")
	n.writeManifest("good.yaml", podManifest("good", ""))
	n.start()
	before := n.waitRunning("good")
	id := before.Status.ContainerStatuses[0].ContainerID

	bad := map[string]string{
		"notyaml.yaml":  ":::: {",
		"service.yaml":  "apiVersion: v1\nkind: Service\nmetadata: {name: svc}\n",
		"noimage.yaml":  "apiVersion: v1\nkind: Pod\nmetadata: {name: noimage}\nspec: {containers: [{name: a}]}\n",
		"a-dup.yaml":    podManifest("good", ""), // sorts first, must not displace the running pod
		"twodocs.yaml":  podManifest("x", "") + "---\n" + podManifest("y", ""),
		"badquant.yaml": podManifest("q", "    resources: {limits: {memory: lots}}\n"),
	}
	for f, body := range bad {
		n.writeManifest(f, body)
	}
	n.eventually("every bad manifest reported with its file", 20*time.Second, func() error {
		log := n.logText()
		for f := range bad {
			if !strings.Contains(log, filepath.Join(n.manifests, f)) {
				return fmt.Errorf("%s not reported yet", f)
			}
		}
		return nil
	})
	for _, want := range []string{`kind \"Service\": want Pod`, "spec.containers[0].image: Required value", "duplicate pod name default/good-" + n.name, "2 YAML documents", "not valid YAML"} {
		if !strings.Contains(n.logText(), want) {
			t.Errorf("agent log lacks the reason %q", want)
		}
	}
	time.Sleep(3 * time.Second) // a periodic rescan (2 s) too
	pods, err := n.pods()
	if err != nil {
		t.Fatal(err)
	}
	if len(pods) != 1 || pods[0].Name != "good-"+n.name {
		t.Fatalf("pods = %d, want only the good one", len(pods))
	}
	after := pods[0]
	if after.Status.Phase != corev1.PodRunning || after.UID != before.UID ||
		after.Status.ContainerStatuses[0].ContainerID != id || after.Status.ContainerStatuses[0].RestartCount != 0 {
		t.Errorf("good pod disturbed: phase %s uid %s (was %s) container %s (was %s) restarts %d",
			after.Status.Phase, after.UID, before.UID, after.Status.ContainerStatuses[0].ContainerID, id, after.Status.ContainerStatuses[0].RestartCount)
	}
}

func TestAgentRestartKeepsContainersRunning(t *testing.T) {
	n := newNode(t, "")
	n.writeManifest("keep.yaml", podManifest("keep", `    resources:
      requests: {cpu: 100m}
`))
	n.start()
	p := n.waitRunning("keep")
	cs := p.Status.ContainerStatuses[0]

	if err := n.stop(); err != nil {
		t.Fatalf("agent did not exit cleanly on SIGTERM: %v", err)
	}
	_, ctrs := n.runtimeObjects(string(p.UID))
	if len(ctrs) != 1 || ctrs[0].State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Fatalf("after the agent stopped the container must still run: %v", ctrs)
	}

	n.start()
	again := n.waitRunning("keep")
	cs2 := again.Status.ContainerStatuses[0]
	if again.UID != p.UID || cs2.ContainerID != cs.ContainerID || cs2.RestartCount != 0 || !cs2.State.Running.StartedAt.Equal(&cs.State.Running.StartedAt) {
		t.Errorf("container restarted across the agent restart: %s/%d started %v, was %s started %v",
			cs2.ContainerID, cs2.RestartCount, cs2.State.Running.StartedAt, cs.ContainerID, cs.State.Running.StartedAt)
	}
	if !again.Status.StartTime.Equal(p.Status.StartTime) {
		t.Errorf("startTime changed across the restart: %v, was %v", again.Status.StartTime, p.Status.StartTime)
	}
}

func TestRemovedWhileAgentDownIsCleanedUp(t *testing.T) {
	n := newNode(t, "")
	n.writeManifest("gone.yaml", podManifest("gone", ""))
	n.start()
	p := n.waitRunning("gone")
	if err := n.stop(); err != nil {
		t.Fatal(err)
	}
	n.removeManifest("gone.yaml")
	n.start()
	n.eventually("orphan removed from the runtime", 60*time.Second, func() error {
		sbs, cs := n.runtimeObjects(string(p.UID))
		if len(sbs)+len(cs) > 0 {
			return fmt.Errorf("%d sandboxes, %d containers left", len(sbs), len(cs))
		}
		if pod := n.cgroupRoot + "/kubepods/besteffort/pod" + string(p.UID); cgroupExists(t, pod) {
			return fmt.Errorf("pod cgroup %s left", pod)
		}
		return nil
	})
}

// Static pods are critical to the kubelet: one that does not fit tries to
// preempt, and with nothing it may preempt (every other pod is static too)
// it is refused in the kubelet's words, naming what it lacks.
func TestAdmissionRejectsWhatDoesNotFit(t *testing.T) {
	n := newNode(t, "maxPods: 2\n")
	n.start()
	n.writeManifest("a.yaml", podManifest("a", ""))
	n.waitRunning("a")

	n.writeManifest("huge.yaml", podManifest("huge", "    resources:\n      requests: {cpu: \"1000\"}\n"))
	p := n.waitRejected("huge")
	const unrecoverable = "Pod was rejected: Unexpected error while attempting to recover from admission failure: preemption: error finding a set of pods to preempt: no set of running pods found to reclaim resources: "
	if p.Status.Reason != "UnexpectedAdmissionError" || !strings.HasPrefix(p.Status.Message, unrecoverable+"[(res: cpu, q: ") {
		t.Errorf("huge: reason %q message %q", p.Status.Reason, p.Status.Message)
	}
	if sbs, cs := n.runtimeObjects(string(p.UID)); len(sbs)+len(cs) > 0 {
		t.Errorf("a rejected pod must not reach the runtime")
	}

	n.writeManifest("b.yaml", podManifest("b", ""))
	n.waitRunning("b")
	n.writeManifest("c.yaml", podManifest("c", ""))
	c := n.waitRejected("c")
	if c.Status.Reason != "UnexpectedAdmissionError" || c.Status.Message != unrecoverable+"[(res: pods, q: 1), ]" {
		t.Errorf("c: reason %q message %q, want the pod slot it lacks", c.Status.Reason, c.Status.Message)
	}
}

func TestRestartPolicies(t *testing.T) {
	n := newNode(t, "")
	pod := func(name, policy, script string) string {
		return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
spec:
  restartPolicy: %s
  terminationGracePeriodSeconds: 2
  containers:
  - name: main
    image: %s
    command: ["sh", "-c", %q]
`, name, policy, testImage, script)
	}
	n.writeManifest("crash.yaml", pod("crash", "Always", "sleep 1; exit 1"))
	n.writeManifest("done.yaml", pod("done", "OnFailure", "exit 0"))
	n.writeManifest("fail.yaml", pod("fail", "Never", "exit 3"))
	// 1.35's restart rules: a Never pod whose container is restarted on
	// exit code 42 only; the second run exits 0 and the pod succeeds.
	n.writeManifest("rules.yaml", strings.Replace(pod("rules", "Never", "if [ -e /state/ran ]; then exit 0; fi; touch /state/ran; exit 42"),
		"    command:", `    restartPolicy: Never
    restartPolicyRules: [{action: Restart, exitCodes: {operator: In, values: [42]}}]
    volumeMounts: [{name: state, mountPath: /state}]
    command:`, 1)+"  volumes: [{name: state, emptyDir: {}}]\n")
	n.start()

	n.waitPod("done", 60*time.Second, "succeeded", func(p *corev1.Pod) error {
		if p == nil || p.Status.Phase != corev1.PodSucceeded {
			return fmt.Errorf("phase %v", p)
		}
		if t := p.Status.ContainerStatuses[0].State.Terminated; t == nil || t.Reason != "Completed" || t.ExitCode != 0 {
			return fmt.Errorf("state %+v", p.Status.ContainerStatuses[0].State)
		}
		return nil
	})
	n.waitPod("fail", 60*time.Second, "failed", func(p *corev1.Pod) error {
		if p == nil || p.Status.Phase != corev1.PodFailed {
			return fmt.Errorf("phase %v", p)
		}
		if t := p.Status.ContainerStatuses[0].State.Terminated; t == nil || t.Reason != "Error" || t.ExitCode != 3 {
			return fmt.Errorf("state %+v", p.Status.ContainerStatuses[0].State)
		}
		return nil
	})
	n.waitPod("rules", 60*time.Second, "succeeded after the rule restarted it once", func(p *corev1.Pod) error {
		if p == nil || p.Status.Phase != corev1.PodSucceeded || len(p.Status.ContainerStatuses) == 0 {
			return fmt.Errorf("phase %v", p)
		}
		cs := p.Status.ContainerStatuses[0]
		if cs.RestartCount != 1 || cs.LastTerminationState.Terminated == nil || cs.LastTerminationState.Terminated.ExitCode != 42 {
			return fmt.Errorf("restarts %d lastState %+v", cs.RestartCount, cs.LastTerminationState)
		}
		return nil
	})
	// Always: the first restart is immediate, then the kubelet's back-off.
	n.waitPod("crash", 60*time.Second, "in CrashLoopBackOff after a restart", func(p *corev1.Pod) error {
		if p == nil || len(p.Status.ContainerStatuses) == 0 {
			return fmt.Errorf("no status")
		}
		cs := p.Status.ContainerStatuses[0]
		if cs.RestartCount < 1 || cs.State.Waiting == nil || cs.State.Waiting.Reason != "CrashLoopBackOff" {
			return fmt.Errorf("restarts %d state %+v", cs.RestartCount, cs.State)
		}
		if !strings.Contains(cs.State.Waiting.Message, "back-off 10s restarting failed container=main pod=crash-"+n.name) {
			return fmt.Errorf("message %q", cs.State.Waiting.Message)
		}
		if lt := cs.LastTerminationState.Terminated; lt == nil || lt.ExitCode != 1 || lt.Reason != "Error" {
			return fmt.Errorf("lastState %+v", cs.LastTerminationState)
		}
		if p.Status.Phase != corev1.PodRunning {
			return fmt.Errorf("phase %s, want Running while restarting", p.Status.Phase)
		}
		return nil
	})
}

func TestUnreachableRuntimeIsReportedClearly(t *testing.T) {
	dir := t.TempDir()
	endpoint := "unix://" + filepath.Join(dir, "missing.sock")
	cfg := filepath.Join(dir, "config.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\ncontainerRuntimeEndpoint: %s\nstaticPodPath: %s\nreadOnlyPort: 0\n", endpoint, dir)), 0o644)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, agentBin, "--config", cfg, "--hostname-override", "unreachable", "--control-socket", filepath.Join(dir, "control.sock")).CombinedOutput()
	if exit, ok := err.(*exec.ExitError); !ok || exit.ExitCode() != 1 {
		t.Fatalf("want exit code 1, got %v\n%s", err, out)
	}
	want := "container runtime not reachable at " + endpoint + ": is containerd running?"
	if !strings.Contains(string(out), want) {
		t.Errorf("output lacks %q:\n%s", want, out)
	}
}

func TestNodectlManagesManifests(t *testing.T) {
	if nodectlBin == "" {
		t.Fatal("NODECTL_BIN is not set: run with `make integration`")
	}
	n := newNode(t, "")
	n.start()
	nodectl := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(nodectlBin, append([]string{"--server", n.url(""), "--control-socket", n.controlSocket()}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("nodectl %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	manifest := filepath.Join(t.TempDir(), "cli.yaml")
	os.WriteFile(manifest, []byte(podManifest("cli", "")), 0o644)
	if out := nodectl("apply", "-f", manifest); !strings.Contains(out, "pod/cli created") {
		t.Errorf("apply: %s", out)
	}
	n.waitRunning("cli")
	out := nodectl("get", "pods", "-o", "wide")
	if !strings.Contains(out, "NAME") || !strings.Contains(out, "cli-"+n.name) || !strings.Contains(out, "Running") || !strings.Contains(out, "BestEffort") {
		t.Errorf("get pods:\n%s", out)
	}
	out = nodectl("describe", "pod", "cli")
	if !strings.Contains(out, "Cgroup:") || !strings.Contains(out, n.cgroupRoot+"/kubepods/besteffort/pod") || !strings.Contains(out, "Container ID:") {
		t.Errorf("describe pod:\n%s", out)
	}
	if out := nodectl("apply", "-f", manifest); !strings.Contains(out, "unchanged") {
		t.Errorf("second apply: %s", out)
	}
	nodectl("delete", "pod", "cli", "--wait")
	if p, _ := n.pod("cli"); p != nil {
		t.Errorf("pod still listed after delete --wait")
	}
}

func TestInitContainerRunsFirstAndSharesEmptyDir(t *testing.T) {
	n := newNode(t, "")
	n.writeManifest("init.yaml", fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: withinit
spec:
  terminationGracePeriodSeconds: 2
  volumes:
  - name: work
    emptyDir: {}
  initContainers:
  - name: prepare
    image: %[1]s
    command: ["sh", "-c", "echo prepared-by-init > /work/index.html"]
    volumeMounts: [{name: work, mountPath: /work}]
  containers:
  - name: serve
    image: %[1]s
    command: ["httpd", "-f", "-p", "8080", "-h", "/work"]
    volumeMounts: [{name: work, mountPath: /work}]
`, testImage))
	n.start()
	p := n.waitRunning("withinit")
	if len(p.Status.InitContainerStatuses) != 1 {
		t.Fatalf("init statuses: %+v", p.Status.InitContainerStatuses)
	}
	if term := p.Status.InitContainerStatuses[0].State.Terminated; term == nil || term.ExitCode != 0 || term.Reason != "Completed" {
		t.Errorf("init container: %+v", p.Status.InitContainerStatuses[0].State)
	}
	if term := p.Status.InitContainerStatuses[0].State.Terminated; term != nil && term.FinishedAt.After(p.Status.ContainerStatuses[0].State.Running.StartedAt.Time) {
		t.Errorf("app container started before the init container finished")
	}
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + net.JoinHostPort(p.Status.PodIP, "8080") + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if strings.TrimSpace(string(body)) != "prepared-by-init" {
		t.Errorf("app served %q: the emptyDir is not shared", body)
	}
	volumes := filepath.Join(n.dir, "root", "pods", string(p.UID))
	if _, err := os.Stat(volumes); err != nil {
		t.Fatalf("emptyDir not under the root dir: %v", err)
	}
	n.removeManifest("init.yaml")
	n.waitGone("withinit")
	if _, err := os.Stat(volumes); !os.IsNotExist(err) {
		t.Errorf("pod volumes left behind at %s", volumes)
	}
}

func TestMissingImageBacksOffAndIsReportedInEvents(t *testing.T) {
	n := newNode(t, "")
	n.writeManifest("ok.yaml", podManifest("ok", ""))
	n.writeManifest("badname.yaml", strings.Replace(podManifest("badname", ""), "image: "+testImage, "image: UPPER/Case::x", 1))
	n.writeManifest("noimage.yaml", `apiVersion: v1
kind: Pod
metadata:
  name: noimage
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: main
    image: 127.0.0.1:5050/nodeagent/does-not-exist:1.0
`)
	n.start()
	n.waitRunning("ok")
	p := n.waitPod("noimage", 60*time.Second, "in ImagePullBackOff", func(p *corev1.Pod) error {
		if p == nil || len(p.Status.ContainerStatuses) == 0 {
			return fmt.Errorf("no status")
		}
		w := p.Status.ContainerStatuses[0].State.Waiting
		if w == nil || w.Reason != "ImagePullBackOff" || !strings.Contains(w.Message, `Back-off pulling image "127.0.0.1:5050/nodeagent/does-not-exist:1.0"`) {
			return fmt.Errorf("state %+v", p.Status.ContainerStatuses[0].State)
		}
		if p.Status.Phase != corev1.PodPending {
			return fmt.Errorf("phase %s", p.Status.Phase)
		}
		return nil
	})
	seen := map[string]bool{}
	for _, e := range n.events(string(p.UID)) {
		seen[e.Reason+": "+e.Message] = true
	}
	for _, want := range []string{
		`Pulling: Pulling image "127.0.0.1:5050/nodeagent/does-not-exist:1.0"`,
		"Failed: Error: ErrImagePull",
		`BackOff: Back-off pulling image "127.0.0.1:5050/nodeagent/does-not-exist:1.0"`,
		"Failed: Error: ImagePullBackOff",
	} {
		if !seen[want] {
			t.Errorf("no event %q among %v", want, seen)
		}
	}
	n.waitPod("badname", 30*time.Second, "InvalidImageName", func(p *corev1.Pod) error {
		if p == nil || len(p.Status.ContainerStatuses) == 0 {
			return fmt.Errorf("no status")
		}
		w := p.Status.ContainerStatuses[0].State.Waiting
		if w == nil || w.Reason != "InvalidImageName" || !strings.Contains(w.Message, `couldn't parse image name "UPPER/Case::x"`) {
			return fmt.Errorf("state %+v", p.Status.ContainerStatuses[0].State)
		}
		return nil
	})
	ok, _ := n.pod("ok")
	if ok.Status.Phase != corev1.PodRunning || ok.Status.ContainerStatuses[0].RestartCount != 0 {
		t.Errorf("the other pod was affected: %s", ok.Status.Phase)
	}
}

// qosReserved (with its feature gate) caps the burstable and besteffort
// cgroups so the memory Guaranteed and Burstable pods requested stays
// theirs: the kubelet's formula on the real hierarchy, relaxed again when
// the Guaranteed pod goes.
func TestQOSReservedCapsTheLowerClasses(t *testing.T) {
	n := newNode(t, "systemReserved:\n  memory: 256Mi\nqosReserved:\n  memory: 100%\nfeatureGates:\n  QOSReserved: true\n")
	n.writeManifest("burstable.yaml", podManifest("bu", `    resources:
      requests: {cpu: 50m, memory: 64Mi}
`))
	n.writeManifest("guaranteed.yaml", podManifest("gu", `    resources:
      limits: {cpu: 100m, memory: 96Mi}
`))
	n.start()
	n.waitRunning("bu")
	n.waitRunning("gu")

	kubepods := n.cgroupRoot + "/kubepods"
	allocatable := memTotal(t) - 256<<20
	limits := func(guaranteed int64) error {
		burstable := allocatable - guaranteed
		for class, want := range map[string]int64{"burstable": burstable, "besteffort": burstable - 64<<20} {
			if got := cgroupValues(t, kubepods+"/"+class).MemoryLimit; got != want {
				return fmt.Errorf("%s memory limit %d, want %d", class, got, want)
			}
		}
		return nil
	}
	if err := limits(96 << 20); err != nil {
		t.Errorf("with a 96Mi Guaranteed and a 64Mi Burstable pod: %v", err)
	}
	n.removeManifest("guaranteed.yaml")
	n.waitGone("gu")
	n.eventually("the reserve relaxed without the Guaranteed pod", 90*time.Second, func() error { return limits(0) })
}
