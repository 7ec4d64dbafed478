//go:build integration

package integration

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/crane"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"nodeagent/cgroups"
	"nodeagent/cri"
)

func TestSIGKILLWhileStartingPodsLeavesNoDuplicates(t *testing.T) {
	n := newNode(t, "")
	n.start()
	const pods = 20
	for i := 0; i < pods; i++ {
		n.writeManifest(fmt.Sprintf("p%02d.yaml", i), podManifest(fmt.Sprintf("p%02d", i), ""))
	}
	// Kill the agent while the batch is in flight.
	n.eventually("some sandboxes started", 30*time.Second, func() error {
		sbs, err := n.cri.ListPodSandbox(context.Background(), &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{cri.LabelManagedBy: n.name}})
		if err != nil || len(sbs) < 3 {
			return fmt.Errorf("%d sandboxes", len(sbs))
		}
		return nil
	})
	n.kill()
	n.start()
	for i := 0; i < pods; i++ {
		n.waitRunning(fmt.Sprintf("p%02d", i))
	}
	sel := map[string]string{cri.LabelManagedBy: n.name}
	sbs, _ := n.cri.ListPodSandbox(context.Background(), &runtimeapi.PodSandboxFilter{LabelSelector: sel})
	cs, _ := n.cri.ListContainers(context.Background(), &runtimeapi.ContainerFilter{LabelSelector: sel})
	perPod := map[string][2]int{}
	for _, sb := range sbs {
		v := perPod[sb.Labels[cri.LabelPodName]]
		v[0]++
		perPod[sb.Labels[cri.LabelPodName]] = v
	}
	for _, c := range cs {
		v := perPod[c.Labels[cri.LabelPodName]]
		v[1]++
		perPod[c.Labels[cri.LabelPodName]] = v
	}
	if len(perPod) != pods {
		t.Errorf("%d pods in the runtime, want %d", len(perPod), pods)
	}
	for pod, v := range perPod {
		if v != [2]int{1, 1} {
			t.Errorf("%s: %d sandboxes and %d containers, want exactly one of each", pod, v[0], v[1])
		}
	}
	for i := 0; i < pods; i++ {
		p, _ := n.pod(fmt.Sprintf("p%02d", i))
		if p.Status.ContainerStatuses[0].RestartCount != 0 {
			t.Errorf("%s restarted %d times", p.Name, p.Status.ContainerStatuses[0].RestartCount)
		}
	}
}

// TestContainerdRestartIsRiddenOut stops the shared containerd (its shims,
// and so the pods, keep running), then brings it back with the project's
// own script.
func TestContainerdRestartIsRiddenOut(t *testing.T) {
	n := newNode(t, "")
	n.writeManifest("steady.yaml", podManifest("steady", ""))
	n.start()
	before := n.waitRunning("steady")

	repo, _ := filepath.Abs("../..")
	runtime := func(verb string) {
		cmd := exec.Command("bash", "hack/runtime.sh", verb)
		cmd.Dir = repo
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("hack/runtime.sh %s: %v\n%s", verb, err, out)
		}
	}
	t.Cleanup(func() { runtime("up") }) // never leave the node without its runtime
	pidFile := filepath.Join(envOr("RUNTIME_RUN_DIR", "/run/nodeagent-runtime"), "containerd.pid")
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// The read-only API's /healthz and the healthz port's say the same.
	healthzPort := fmt.Sprintf("http://127.0.0.1:%d/healthz", n.agent.Options.HealthzPort)
	health := func(u string) (int, string) {
		resp, err := http.Get(u)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	n.eventually("/healthz reports the runtime down", 30*time.Second, func() error {
		for _, u := range []string{n.url("/healthz"), healthzPort} {
			if code, body := health(u); code != 500 || !strings.Contains(body, "[-]runtime failed: container runtime at "+criEndpoint+" is down") || !strings.Contains(body, "[+]pleg ok") {
				return fmt.Errorf("%s: %d %q", u, code, body)
			}
		}
		return nil
	})
	runtime("up")
	n.eventually("/healthz ok again", 60*time.Second, func() error {
		for _, u := range []string{n.url("/healthz"), healthzPort} {
			if code, body := health(u); code != 200 {
				return fmt.Errorf("%s: %d %q", u, code, body)
			}
		}
		return nil
	})
	// Startup and recovery fold into one NodeReady event counted twice.
	byReason := map[string]corev1.Event{}
	for _, e := range n.events(n.name) {
		byReason[e.Reason] = e
	}
	down, up := byReason["NodeNotReady"], byReason["NodeReady"]
	if down.Count != 1 || !strings.Contains(down.Message, "NodeNotReady") || up.Count != 2 || up.LastTimestamp.Before(&down.LastTimestamp) {
		t.Errorf("node events: NodeNotReady %+v, NodeReady %+v: want the outage between two NodeReady", down, up)
	}
	after := n.waitRunning("steady")
	if after.Status.ContainerStatuses[0].ContainerID != before.Status.ContainerStatuses[0].ContainerID || after.Status.ContainerStatuses[0].RestartCount != 0 {
		t.Errorf("the pod was restarted across the runtime restart: %s/%d, was %s",
			after.Status.ContainerStatuses[0].ContainerID, after.Status.ContainerStatuses[0].RestartCount, before.Status.ContainerStatuses[0].ContainerID)
	}
}

// pushVictim pushes a copy of the pause image with a label of its own to
// the local registry, for image GC to remove: a plain copy would share the
// pause image's ID, and so its protection.
func pushVictim(t *testing.T) string {
	t.Helper()
	victim := "127.0.0.1:5050/nodeagent/gc-victim:" + randomHex(3)
	base, err := crane.Pull(envOr("PAUSE_IMAGE", "127.0.0.1:5050/nodeagent/pause:1.0"), crane.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	cfg, _ := base.ConfigFile()
	cfg = cfg.DeepCopy()
	cfg.Config.Labels = map[string]string{"gc-victim": victim}
	distinct, err := mutate.ConfigFile(base, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := crane.Push(distinct, victim, crane.Insecure); err != nil {
		t.Fatalf("push %s: %v", victim, err)
	}
	return victim
}

// imageMaximumGCAge: an image unused that long goes though the disk is
// far below the threshold, and not before the agent has run that long.
func TestImageGCRemovesImagesUnusedPastMaxAge(t *testing.T) {
	ctx := context.Background()
	victim := pushVictim(t)
	n := newNode(t, "imageMaximumGCAge: 8s\nimageMinimumGCAge: 1s\n")
	if _, err := n.cri.PullImage(ctx, victim, nil, nil); err != nil {
		t.Fatal(err)
	}
	n.args = []string{"--image-gc-period", "1s"}
	n.writeManifest("user.yaml", podManifest("user", ""))
	// Before the start: the agent's own clock for the age begins later.
	started := time.Now()
	n.start()
	n.waitRunning("user")
	n.eventually("the image unused past imageMaximumGCAge removed", 30*time.Second, func() error {
		img, err := n.cri.ImageStatus(ctx, victim)
		if err != nil || img != nil {
			return fmt.Errorf("still present (%v)", err)
		}
		return nil
	})
	if took := time.Since(started); took < 8*time.Second {
		t.Errorf("removed %v after the start, before imageMaximumGCAge", took)
	}
	if img, err := n.cri.ImageStatus(ctx, testImage); err != nil || img == nil {
		t.Errorf("%s, in use, was removed", testImage)
	}
	// Other unused images of the shared runtime go too. The runtime shows
	// the image gone before the agent's RemoveImage returns and counts it
	// (a pass may still be removing others): the counter may lag a little.
	n.eventually("kubelet_image_garbage_collected_total{reason=age} counts the removal", 10*time.Second, func() error {
		if v, _ := metricValue(n.metricFamilies(), "kubelet_image_garbage_collected_total", "reason=age"); v < 1 {
			return fmt.Errorf("%v, want at least 1", v)
		}
		return nil
	})
}

func TestImageGCRemovesOnlyUnusedImages(t *testing.T) {
	ctx := context.Background()
	pause := envOr("PAUSE_IMAGE", "127.0.0.1:5050/nodeagent/pause:1.0")
	victim := pushVictim(t)
	// imageMinimumGCAge: 0s would mean the kubelet's default (2m), as in
	// the kubelet: 1ns is "no minimum age".
	n := newNode(t, "imageGCHighThresholdPercent: 1\nimageGCLowThresholdPercent: 0\nimageMinimumGCAge: 1ns\n")
	if _, err := n.cri.PullImage(ctx, victim, nil, nil); err != nil {
		t.Fatal(err)
	}
	n.args = []string{"--image-gc-period", "1s"}
	n.writeManifest("user.yaml", podManifest("user", ""))
	n.start()
	n.waitRunning("user")
	n.eventually("the unused image removed", 30*time.Second, func() error {
		img, err := n.cri.ImageStatus(ctx, victim)
		if err != nil || img != nil {
			return fmt.Errorf("still present (%v)", err)
		}
		return nil
	})
	for _, keep := range []string{testImage, pause} {
		if img, err := n.cri.ImageStatus(ctx, keep); err != nil || img == nil {
			t.Errorf("%s was removed: the image in use and the sandbox image must stay", keep)
		}
	}
	// Logged once RemoveImage returns, after the runtime shows it gone.
	n.eventually("a log line for the removal", 10*time.Second, func() error {
		if !strings.Contains(n.logText(), "removed unused image") {
			return fmt.Errorf("none yet")
		}
		return nil
	})
}

// Start-up faults end with exit code 1 and one error line that names the
// problem and the fix, never a panic.
func TestStartupFaultsAreOneClearLine(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	busyPort := busy.Addr().(*net.TCPAddr).Port
	for _, tc := range []struct {
		name, config string
		want         []string
	}{
		{"port in use", fmt.Sprintf("readOnlyPort: %d\n", busyPort),
			[]string{fmt.Sprintf("read-only API on 127.0.0.1:%d", busyPort), "address already in use", "another process", "readOnlyPort"}},
		{"cgroup root not creatable", "cgroupRoot: /cgroup.procs\n",
			[]string{"under cgroupRoot", "/cgroup.procs", "not a directory", "set cgroupRoot"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newNode(t, "")
			cfg, _ := os.ReadFile(n.configFile)
			// The fault's line replaces the harness's own setting.
			key, _, _ := strings.Cut(tc.config, ":")
			var lines []string
			for _, l := range strings.Split(string(cfg), "\n") {
				if !strings.HasPrefix(l, key+":") {
					lines = append(lines, l)
				}
			}
			os.WriteFile(n.configFile, []byte(strings.Join(lines, "\n")+"\n"+tc.config), 0o644)
			out, err := n.runOnce()
			if exit, ok := err.(*exec.ExitError); !ok || exit.ExitCode() != 1 {
				t.Fatalf("want exit code 1, got %v\n%s", err, out)
			}
			var errors []string
			for _, l := range strings.Split(out, "\n") {
				if strings.Contains(l, "level=ERROR") {
					errors = append(errors, l)
				}
			}
			if len(errors) != 1 || strings.Contains(out, "panic") || strings.Contains(out, "goroutine ") {
				t.Fatalf("want one error line and no panic:\n%s", out)
			}
			for _, w := range tc.want {
				if !strings.Contains(errors[0], w) {
					t.Errorf("error line lacks %q: %s", w, errors[0])
				}
			}
		})
	}
}

// A StartContainer cut off while containerd creates the task (as when the
// agent is killed mid-start: its request is cancelled) leaves the
// container EXITED with StartError and a task the CRI will not remove
// ("cannot delete running task"). This is the cause of the flake of
// TestSIGKILLWhileStartingPodsLeavesNoDuplicates: the restarted agent
// retried the removal for ever. cri.DeleteTask deletes that task, and the
// container is removed.
func TestStartCutOffLeavesATaskDeleteTaskRemoves(t *testing.T) {
	ctx := context.Background()
	parent := "/nodeagent-itest-cutoff-" + randomHex(3)
	sbCfg := &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "cutoff-" + randomHex(3), Namespace: "default", Uid: "cutoff-" + randomHex(4)},
		Linux: &runtimeapi.LinuxPodSandboxConfig{CgroupParent: parent + "/pod"}, LogDirectory: t.TempDir()}
	client, err := cri.New(criEndpoint, cri.Options{Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	sb, err := client.RunPodSandbox(ctx, sbCfg, "")
	if err != nil {
		t.Fatal(err)
	}
	created := map[string]bool{sb: true}
	defer func() {
		cs, _ := client.ListContainers(ctx, &runtimeapi.ContainerFilter{PodSandboxId: sb})
		for _, c := range cs {
			client.DeleteTask(ctx, c.Id)
			client.RemoveContainer(ctx, c.Id)
		}
		client.StopPodSandbox(ctx, sb)
		client.RemovePodSandbox(ctx, sb)
		cgroupManager(t).Remove(cgroups.ParseCgroupfs(sbCfg.Linux.CgroupParent))
		cgroupManager(t).Remove(cgroups.ParseCgroupfs(parent))
		// containerd leaves the shim of a start cut off at the wrong moment
		// running with nothing in it: shown here, and not left on the host.
		if leaked := shimsOf(created); len(leaked) > 0 {
			t.Logf("containerd left %d shim(s) of removed containers running after the cut-offs; killed: %v", len(leaked), leaked)
			for _, pid := range leaked {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}()
	newContainer := func(i int) string {
		cfg := &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: fmt.Sprintf("c%d", i)}, Image: &runtimeapi.ImageSpec{Image: testImage},
			Command: []string{"sleep", "3600"}, LogPath: fmt.Sprintf("c%d.log", i), Linux: &runtimeapi.LinuxContainerConfig{}}
		id, err := client.CreateContainer(ctx, sb, cfg, sbCfg)
		if err != nil {
			t.Fatal(err)
		}
		created[id] = true
		return id
	}
	// How long a whole start takes here; then the cut-off walks toward the
	// boundary between "cut before the task" and "cut after it was
	// created", where the window is: a fixed sweep hit it too rarely on
	// some runs (none in 3 minutes).
	var full time.Duration
	for i := range 3 {
		id := newContainer(1000 + i)
		start := time.Now()
		if err := client.StartContainer(ctx, id); err != nil {
			t.Fatal(err)
		}
		full = max(full, time.Since(start))
		client.StopContainer(ctx, id, 0)
		client.RemoveContainer(ctx, id)
	}
	cut, step := full/2, max(full/100, time.Millisecond)
	for i, deadline := 0, time.Now().Add(3*time.Minute); time.Now().Before(deadline); i++ {
		id := newContainer(i)
		jitter := time.Duration(rand.Int64N(int64(4*step))) - 2*step
		sctx, cancel := context.WithTimeout(ctx, max(cut+jitter, time.Millisecond))
		startErr := client.StartContainer(sctx, id)
		cancel()
		var st *runtimeapi.ContainerStatus
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if st, err = client.ContainerStatus(ctx, id); err == nil && st.State != runtimeapi.ContainerState_CONTAINER_CREATED {
				break
			}
		}
		// Cut after the task was created ("failed to start containerd
		// task", cleaned up by containerd) is too late as well.
		if startErr == nil || st.State != runtimeapi.ContainerState_CONTAINER_EXITED || st.StartedAt != 0 ||
			strings.Contains(st.Message, "start containerd task") {
			cut = max(cut-step, time.Millisecond) // too late: the start went through
			client.StopContainer(ctx, id, 0)
			client.RemoveContainer(ctx, id)
			continue
		}
		removeErr := client.RemoveContainer(ctx, id)
		if removeErr == nil {
			cut += step // too early: cut off before the task existed, nothing stale
			continue
		}
		t.Logf("start (%s whole) cut off at %s after %d tries: %s; RemoveContainer: %v", full.Round(time.Millisecond), cut.Round(time.Millisecond), i+1, st.Message, removeErr)
		if err := client.DeleteTask(ctx, id); err != nil {
			t.Fatalf("DeleteTask: %v", err)
		}
		if err := client.RemoveContainer(ctx, id); err != nil {
			t.Fatalf("RemoveContainer after DeleteTask: %v", err)
		}
		return
	}
	t.Fatal("no start was cut off inside task creation in 3 minutes: the test tests nothing")
}

// shimsOf lists the containerd shim processes serving one of ids.
func shimsOf(ids map[string]bool) []int {
	var pids []int
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		if len(args) == 0 || !strings.Contains(filepath.Base(args[0]), "containerd-shim") {
			continue
		}
		for i := 0; i+1 < len(args); i++ {
			if args[i] == "-id" && ids[args[i+1]] {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}
