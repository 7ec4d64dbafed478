//go:build integration

package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

func shPod(name, extraSpec, script string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
spec:
%s  containers:
  - name: main
    image: %s
    command: ["sh", "-c", %q]
`, name, extraSpec, testImage, script)
}

// statePod runs script in a container with an emptyDir at /state that
// outlives its restarts.
func statePod(name, script string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
spec:
  terminationGracePeriodSeconds: 2
  volumes: [{name: state, emptyDir: {}}]
  containers:
  - name: main
    image: %s
    volumeMounts: [{name: state, mountPath: /state}]
    command: ["sh", "-c", %q]
`, name, testImage, script)
}

func (n *node) events(uid string) []corev1.Event {
	n.t.Helper()
	var list corev1.EventList
	n.getJSON("/events", &list)
	var out []corev1.Event
	for _, e := range list.Items {
		if string(e.InvolvedObject.UID) == uid {
			out = append(out, e)
		}
	}
	return out
}

func TestTerminationMessages(t *testing.T) {
	n := newNode(t, "")
	n.writeManifest("file.yaml", shPod("file", "  restartPolicy: Never\n", "printf 'bye from file' > /dev/termination-log; exit 0"))
	n.writeManifest("logs.yaml", strings.Replace(shPod("logs", "  restartPolicy: Never\n", "echo first; echo the last words; exit 3"),
		"    command:", "    terminationMessagePolicy: FallbackToLogsOnError\n    command:", 1))
	n.writeManifest("custom.yaml", strings.Replace(shPod("custom", "  restartPolicy: Never\n", "echo custom path > /tmp/msg; exit 1"),
		"    command:", "    terminationMessagePath: /tmp/msg\n    command:", 1))
	n.start()
	for name, want := range map[string]struct {
		phase corev1.PodPhase
		msg   string
	}{
		"file":   {corev1.PodSucceeded, "bye from file"},
		"logs":   {corev1.PodFailed, "first\nthe last words\n"},
		"custom": {corev1.PodFailed, "custom path\n"},
	} {
		n.waitPod(name, 60*time.Second, "terminated with its message", func(p *corev1.Pod) error {
			if p == nil || p.Status.Phase != want.phase {
				return fmt.Errorf("phase %v", p)
			}
			term := p.Status.ContainerStatuses[0].State.Terminated
			if term == nil || term.Message != want.msg {
				return fmt.Errorf("terminated %+v, want message %q", term, want.msg)
			}
			return nil
		})
	}
}

func TestActiveDeadlineFailsThePod(t *testing.T) {
	n := newNode(t, "")
	n.writeManifest("deadline.yaml", podManifest("deadline", "")+"  activeDeadlineSeconds: 2\n")
	n.start()
	n.waitRunning("deadline")
	p := n.waitPod("deadline", 60*time.Second, "failed with DeadlineExceeded", func(p *corev1.Pod) error {
		if p == nil || p.Status.Phase != corev1.PodFailed || p.Status.Reason != "DeadlineExceeded" {
			return fmt.Errorf("status %+v", p)
		}
		if p.Status.ContainerStatuses[0].State.Terminated == nil {
			return fmt.Errorf("container not terminated yet: %+v", p.Status.ContainerStatuses[0].State)
		}
		return nil
	})
	if p.Status.Message != "Pod was active on the node longer than the specified deadline" {
		t.Errorf("message %q", p.Status.Message)
	}
	if elapsed := p.Status.ContainerStatuses[0].State.Terminated.FinishedAt.Sub(p.Status.StartTime.Time); elapsed < 2*time.Second {
		t.Errorf("stopped %s after start, before the 2 s deadline", elapsed)
	}
	// It stays Failed: no restart even under restartPolicy Always.
	time.Sleep(3 * time.Second)
	if p, _ := n.pod("deadline"); p.Status.Phase != corev1.PodFailed || p.Status.ContainerStatuses[0].RestartCount != 0 {
		t.Errorf("after the deadline: %s, restarts %d", p.Status.Phase, p.Status.ContainerStatuses[0].RestartCount)
	}
}

func TestGracePeriodIsHonoured(t *testing.T) {
	n := newNode(t, "")
	// "stubborn" ignores SIGTERM and must be killed at the deadline; "polite"
	// exits on SIGTERM and must go at once.
	n.writeManifest("stubborn.yaml", shPod("stubborn", "  terminationGracePeriodSeconds: 5\n", "trap '' TERM; while true; do sleep 1; done"))
	n.writeManifest("polite.yaml", shPod("polite", "  terminationGracePeriodSeconds: 30\n", "trap 'exit 0' TERM; while true; do sleep 1 & wait $!; done"))
	n.start()
	n.waitRunning("stubborn")
	n.waitRunning("polite")
	removed := time.Now()
	n.removeManifest("stubborn.yaml")
	n.removeManifest("polite.yaml")
	gone := map[string]time.Duration{}
	n.eventually("both pods gone", 60*time.Second, func() error {
		for _, name := range []string{"stubborn", "polite"} {
			if _, ok := gone[name]; ok {
				continue
			}
			if p, err := n.pod(name); err == nil && p == nil {
				gone[name] = time.Since(removed)
			}
		}
		if len(gone) < 2 {
			return fmt.Errorf("gone so far: %v", gone)
		}
		return nil
	})
	if gone["stubborn"] < 5*time.Second {
		t.Errorf("a container ignoring SIGTERM was killed after %s, before its 5 s grace period", gone["stubborn"])
	}
	if gone["polite"] >= 5*time.Second {
		t.Errorf("a container that exits on SIGTERM took %s: the stop signal was not SIGTERM", gone["polite"])
	}
}

// The sidecar starts before the app and gets its SIGTERM only once the
// app has exited (each writes to a host directory as it goes).
func TestSidecarStartsFirstAndStopsLast(t *testing.T) {
	n := newNode(t, "")
	record := t.TempDir()
	n.writeManifest("sidecar.yaml", fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: withsidecar
spec:
  terminationGracePeriodSeconds: 10
  volumes: [{name: record, hostPath: {path: %[2]s}}]
  initContainers:
  - name: helper
    image: %[1]s
    restartPolicy: Always
    command: ["sh", "-c", "trap 'echo helper-term >> /record/order; exit 0' TERM; while true; do sleep 1 & wait $!; done"]
    volumeMounts: [{name: record, mountPath: /record}]
  containers:
  - name: app
    image: %[1]s
    command: ["sh", "-c", "trap 'sleep 2; echo app-exit >> /record/order; exit 0' TERM; while true; do sleep 1 & wait $!; done"]
    volumeMounts: [{name: record, mountPath: /record}]
`, testImage, record))
	n.start()
	p := n.waitRunning("withsidecar")
	sidecar, app := p.Status.InitContainerStatuses[0], p.Status.ContainerStatuses[0]
	if sidecar.State.Running == nil || app.State.Running.StartedAt.Before(&sidecar.State.Running.StartedAt) {
		t.Errorf("sidecar %+v, app %+v: the sidecar must run, and start first", sidecar.State, app.State)
	}
	if p.Status.Conditions[1].Status != corev1.ConditionTrue {
		t.Errorf("Initialized: %+v", p.Status.Conditions[1])
	}
	n.removeManifest("sidecar.yaml")
	n.waitGone("withsidecar")
	if b, err := os.ReadFile(filepath.Join(record, "order")); err != nil || string(b) != "app-exit\nhelper-term\n" {
		t.Errorf("stop order %q (%v): the sidecar must get SIGTERM after the app exited", b, err)
	}
}

func TestNodectlLogsAndExec(t *testing.T) {
	if nodectlBin == "" {
		t.Fatal("NODECTL_BIN is not set: run with `make integration`")
	}
	n := newNode(t, "")
	// Each run prints its run number; the first run exits so that there is
	// a previous log, the second keeps running. The runtime copies stdout
	// and stderr separately, so the stderr line comes well before the rest
	// to keep the file's order certain.
	n.writeManifest("talk.yaml", statePod("talk",
		"echo x >> /state/runs; r=$(wc -l < /state/runs); echo oops >&2; sleep 0.5; for i in 1 2 3; do echo run $r line $i; done; [ $r -ge 2 ] && exec sleep 3600; exit 1"))
	n.start()
	n.waitPod("talk", 60*time.Second, "running its second run", func(p *corev1.Pod) error {
		if p == nil || len(p.Status.ContainerStatuses) == 0 || p.Status.ContainerStatuses[0].RestartCount != 1 || p.Status.ContainerStatuses[0].State.Running == nil {
			return fmt.Errorf("not yet: %+v", p)
		}
		return nil
	})
	nodectl := func(args ...string) (string, int) {
		t.Helper()
		cmd := exec.Command(nodectlBin, append([]string{"--server", n.url(""), "--control-socket", n.controlSocket()}, args...)...)
		out, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return string(out), code
	}
	n.eventually("second run's log complete", 10*time.Second, func() error {
		if out, _ := nodectl("logs", "talk"); !strings.Contains(out, "line 3") {
			return fmt.Errorf("log so far: %q", out)
		}
		return nil
	})
	if out, code := nodectl("logs", "talk"); code != 0 || out != "oops\nrun 2 line 1\nrun 2 line 2\nrun 2 line 3\n" {
		t.Errorf("logs: %d %q", code, out)
	}
	if out, _ := nodectl("logs", "talk", "--tail", "2"); out != "run 2 line 2\nrun 2 line 3\n" {
		t.Errorf("logs --tail 2: %q", out)
	}
	if out, _ := nodectl("logs", "talk", "--previous"); out != "oops\nrun 1 line 1\nrun 1 line 2\nrun 1 line 3\n" {
		t.Errorf("logs --previous: %q", out)
	}
	// A previous run has ended: -f prints it and returns.
	if out, code := nodectl("logs", "talk", "--previous", "-f"); code != 0 || out != "oops\nrun 1 line 1\nrun 1 line 2\nrun 1 line 3\n" {
		t.Errorf("logs --previous -f: %d %q", code, out)
	}
	if out, _ := nodectl("logs", "talk", "--timestamps", "--tail", "1"); !strings.HasSuffix(out, "Z run 2 line 3\n") || !strings.HasPrefix(out, "20") {
		t.Errorf("logs --timestamps: %q", out)
	}
	if out, code := nodectl("exec", "talk", "--", "sh", "-c", "cat /state/runs | wc -l; echo to-stderr >&2; exit 7"); code != 7 || !strings.Contains(out, "2\n") || !strings.Contains(out, "to-stderr") {
		t.Errorf("exec: code %d output %q", code, out)
	}
	// -i: stdin reaches the command through the runtime's streaming server.
	in := exec.Command(nodectlBin, "--server", n.url(""), "--control-socket", n.controlSocket(), "exec", "-i", "talk", "--", "sh")
	in.Stdin = strings.NewReader("echo from-stdin\nexit 4\n")
	out, err := in.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 4 || !strings.Contains(string(out), "from-stdin") {
		t.Errorf("exec -i: %v %q", err, out)
	}
	// -it: a terminal, here from script(1).
	tty := exec.Command("script", "-qec", nodectlBin+" --server "+n.url("")+" --control-socket "+n.controlSocket()+" exec -it talk -- sh -c 'tty; exit 6'", "/dev/null")
	out, err = tty.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 6 || !strings.Contains(string(out), "/dev/pts/") {
		t.Errorf("exec -it: %v %q", err, out)
	}
	if out, code := nodectl("logs", "talk", "-c", "nope"); code != 1 || !strings.Contains(out, "container nope is not valid for pod talk-"+n.name) {
		t.Errorf("logs -c nope: %d %q", code, out)
	}
}

func TestContainerLogsAreRotated(t *testing.T) {
	n := newNode(t, "containerLogMaxSize: 16Ki\ncontainerLogMaxFiles: 3\ncontainerLogMonitorInterval: 1s\n")
	n.writeManifest("chatty.yaml", shPod("chatty", "  terminationGracePeriodSeconds: 2\n",
		"i=0; while true; do i=$((i+1)); echo line $i $(head -c 300 /dev/zero | tr '\\\\0' x); sleep 0.01; done"))
	n.start()
	p := n.waitRunning("chatty")
	dir := filepath.Join(n.dir, "logs", fmt.Sprintf("%s_%s_%s", p.Namespace, p.Name, p.UID), "main")
	// A follower started before the rotations keeps getting new lines
	// after them (it used to keep reading the renamed file, silent).
	var followed logBuffer
	follow := exec.Command(nodectlBin, "--server", n.url(""), "--control-socket", n.controlSocket(), "logs", "-f", "chatty")
	follow.Stdout, follow.Stderr = &followed, &followed
	if err := follow.Start(); err != nil {
		t.Fatal(err)
	}
	defer follow.Process.Kill()
	n.eventually("the log rotated twice (one plain, one gzipped)", 60*time.Second, func() error {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return err
		}
		var plain, gz int
		for _, e := range entries {
			switch {
			case e.Name() == "0.log":
			case strings.HasSuffix(e.Name(), ".gz"):
				gz++
			default:
				plain++
			}
		}
		if len(entries) > 3 {
			return fmt.Errorf("%d files, more than containerLogMaxFiles: %v", len(entries), entries)
		}
		if plain < 1 || gz < 1 {
			return fmt.Errorf("plain %d gz %d", plain, gz)
		}
		return nil
	})
	// The runtime writes to the reopened file, and the container keeps
	// running. A rotation may be under way (renamed, not yet reopened):
	// the file is back once the runtime reopened it.
	var st1 os.FileInfo
	n.eventually("the reopened 0.log", 5*time.Second, func() (err error) {
		st1, err = os.Stat(filepath.Join(dir, "0.log"))
		return err
	})
	time.Sleep(500 * time.Millisecond)
	st2, _ := os.Stat(filepath.Join(dir, "0.log"))
	if st2.Size() == st1.Size() && st2.ModTime().Equal(st1.ModTime()) {
		t.Error("nothing written to the reopened log")
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) > 3 {
		t.Errorf("%d log files, want at most 3", len(entries))
	}
	if p, _ := n.pod("chatty"); p.Status.ContainerStatuses[0].RestartCount != 0 {
		t.Error("rotation restarted the container")
	}
	// Every line in a rotated file was written before the current 0.log:
	// the follower must print a line past the newest of them, in order.
	rotatedMax := 0
	for _, e := range entries {
		if e.Name() == "0.log" || strings.HasSuffix(e.Name(), ".gz") {
			continue
		}
		data, _ := os.ReadFile(filepath.Join(dir, e.Name()))
		rotatedMax = max(rotatedMax, maxLineNumber(string(data)))
	}
	n.eventually("the follower printed lines written after the rotations", 10*time.Second, func() error {
		got := followed.String()
		if last := maxLineNumber(got); last <= rotatedMax {
			return fmt.Errorf("the follower's last line is %d, the rotated files reach %d; it printed %d bytes ending %q",
				last, rotatedMax, len(got), got[max(0, len(got)-200):])
		}
		return nil
	})
	prev := 0
	for _, m := range chattyLine.FindAllStringSubmatch(followed.String(), -1) {
		i, _ := strconv.Atoi(m[1])
		if i <= prev {
			t.Fatalf("the follower printed line %d after line %d", i, prev)
		}
		prev = i
	}
}

var chattyLine = regexp.MustCompile(`\bline (\d+)\b`)

// maxLineNumber is the highest "line N" in a log.
func maxLineNumber(log string) int {
	n := 0
	for _, m := range chattyLine.FindAllStringSubmatch(log, -1) {
		i, _ := strconv.Atoi(m[1])
		n = max(n, i)
	}
	return n
}

func TestDeleteWithGracePeriodOverride(t *testing.T) {
	if nodectlBin == "" {
		t.Fatal("NODECTL_BIN is not set: run with `make integration`")
	}
	n := newNode(t, "")
	// Both ignore SIGTERM and ask for 30 s; the delete overrides that.
	n.writeManifest("now.yaml", shPod("now", "  terminationGracePeriodSeconds: 30\n", "trap '' TERM; while true; do sleep 1; done"))
	n.writeManifest("three.yaml", shPod("three", "  terminationGracePeriodSeconds: 30\n", "trap '' TERM; while true; do sleep 1; done"))
	n.start()
	n.waitRunning("now")
	n.waitRunning("three")
	del := func(name, grace string) time.Duration {
		start := time.Now()
		out, err := exec.Command(nodectlBin, "--server", n.url(""), "--control-socket", n.controlSocket(), "delete", "pod", name, "--grace-period", grace, "--wait").CombinedOutput()
		if err != nil {
			t.Fatalf("delete %s: %v\n%s", name, err, out)
		}
		return time.Since(start)
	}
	if d := del("now", "0"); d >= 15*time.Second {
		t.Errorf("--grace-period 0 took %s: the pod's 30 s grace was used", d)
	}
	if d := del("three", "3"); d < 3*time.Second || d >= 20*time.Second {
		t.Errorf("--grace-period 3 took %s", d)
	}
	for _, f := range []string{"now.yaml", "three.yaml"} {
		if _, err := os.Stat(filepath.Join(n.manifests, f)); !os.IsNotExist(err) {
			t.Errorf("manifest %s still there", f)
		}
	}
	out, err := exec.Command(nodectlBin, "--server", n.url(""), "--control-socket", n.controlSocket(), "delete", "pod", "nosuch", "--grace-period", "1").CombinedOutput()
	if err == nil || !strings.Contains(string(out), `pods "nosuch" not found`) {
		t.Errorf("deleting a missing pod: %v %s", err, out)
	}
}

func TestCrashLoopBackOffIntervals(t *testing.T) {
	n := newNode(t, "crashLoopBackOff:\n  maxContainerRestartPeriod: 3s\n")
	n.writeManifest("loop.yaml", statePod("loop", "date +%s.%N >> /state/starts; exit 1"))
	n.start()
	var p *corev1.Pod
	n.eventually("four starts", 60*time.Second, func() error {
		var err error
		if p, err = n.pod("loop"); err != nil || p == nil {
			return fmt.Errorf("no pod")
		}
		b, err := os.ReadFile(filepath.Join(n.dir, "root", "pods", string(p.UID), "volumes", "kubernetes.io~empty-dir", "state", "starts"))
		if err != nil {
			return err
		}
		if lines := strings.Fields(string(b)); len(lines) < 4 {
			return fmt.Errorf("%d starts", len(lines))
		}
		return nil
	})
	b, _ := os.ReadFile(filepath.Join(n.dir, "root", "pods", string(p.UID), "volumes", "kubernetes.io~empty-dir", "state", "starts"))
	var starts []float64
	for _, l := range strings.Fields(string(b)) {
		var f float64
		fmt.Sscanf(l, "%f", &f)
		starts = append(starts, f)
	}
	gaps := []float64{starts[1] - starts[0], starts[2] - starts[1], starts[3] - starts[2]}
	// The first restart is immediate; then the back-off, capped at 3 s
	// instead of the default 10 s, 20 s, ...
	if gaps[0] >= 3 {
		t.Errorf("first restart after %.1fs: it must be immediate", gaps[0])
	}
	for _, g := range gaps[1:] {
		if g < 3 || g >= 9 {
			t.Errorf("restart gaps %v: want 3 s back-offs", gaps)
			break
		}
	}
	// The file shows a start before the agent has seen it (the next relist,
	// within a second): status and garbage collection follow.
	n.eventually("restartCount 3 and at most 2 container records", 10*time.Second, func() error {
		if p, _ = n.pod("loop"); p == nil || p.Status.ContainerStatuses[0].RestartCount < 3 {
			return fmt.Errorf("restartCount after 4 starts: %+v", p)
		}
		// Garbage collection keeps the current and the previous record only.
		if _, cs := n.runtimeObjects(string(p.UID)); len(cs) > 2 {
			return fmt.Errorf("%d container records after 4 starts, want at most 2", len(cs))
		}
		return nil
	})
}

func TestOOMKilledReason(t *testing.T) {
	n := newNode(t, "")
	n.writeManifest("hog.yaml", fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: hog
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 2
  containers:
  - name: main
    image: %s
    command: ["memhog", "--mb", "128", "--rate", "0"]
    resources:
      limits: {memory: 32Mi}
`, testImage))
	n.start()
	var uid string
	n.waitPod("hog", 60*time.Second, "OOM killed", func(p *corev1.Pod) error {
		if p == nil || p.Status.Phase != corev1.PodFailed {
			return fmt.Errorf("phase %v", p)
		}
		uid = string(p.UID)
		term := p.Status.ContainerStatuses[0].State.Terminated
		if term == nil || term.Reason != "OOMKilled" || term.ExitCode != 137 {
			return fmt.Errorf("terminated %+v", term)
		}
		return nil
	})
	// The kernel's own report of the kill becomes a node event naming the
	// process, its cgroup and its pod.
	n.eventually("OOMKilling node event", 10*time.Second, func() error {
		for _, e := range n.events(n.name) {
			if e.Reason == "OOMKilling" && strings.Contains(e.Message, "(memhog)") && strings.Contains(e.Message, "(pod default/hog-"+n.name+")") {
				return nil
			}
		}
		return fmt.Errorf("no OOMKilling event for memhog in %v", n.events(n.name))
	})
	// And an event on the pod, naming the process and the container, which
	// nodectl describe shows.
	n.eventually("OOMKilling pod event", 10*time.Second, func() error {
		for _, e := range n.events(uid) {
			if e.Reason == "OOMKilling" && strings.Contains(e.Message, "(memhog) in container main") && e.InvolvedObject.FieldPath == "spec.containers{main}" {
				return nil
			}
		}
		return fmt.Errorf("no OOMKilling event for container main in %v", n.events(uid))
	})
	out, err := exec.Command(nodectlBin, "describe", "pod", "hog", "--server", n.url("")).CombinedOutput()
	if err != nil || !regexp.MustCompile(`Warning +OOMKilling .*Killed process \d+ \(memhog\) in container main`).Match(out) {
		t.Errorf("nodectl describe pod hog (%v) does not show the OOM kill:\n%s", err, out)
	}
	if v, _ := metricValue(n.metricFamilies(), "nodeagent_kernel_oom_kills_total", "constraint=CONSTRAINT_MEMCG"); v < 1 {
		t.Errorf("nodeagent_kernel_oom_kills_total{constraint=CONSTRAINT_MEMCG} = %v, want >= 1", v)
	}
}

func TestEditedManifestReplacesThePodAfterItStops(t *testing.T) {
	n := newNode(t, "")
	v1 := shPod("edit", "  terminationGracePeriodSeconds: 30\n", "trap 'sleep 3; exit 0' TERM; echo v1; while true; do sleep 1 & wait $!; done")
	n.writeManifest("edit.yaml", v1)
	n.start()
	old := n.waitRunning("edit")
	edited := time.Now()
	n.writeManifest("edit.yaml", strings.Replace(v1, "echo v1", "echo v2", 1))
	p := n.waitPod("edit", 60*time.Second, "replaced", func(p *corev1.Pod) error {
		if p == nil || p.UID == old.UID || p.Status.Phase != corev1.PodRunning {
			return fmt.Errorf("not yet: %+v", p)
		}
		return nil
	})
	// StartedAt reaches us in whole seconds; without the wait the new pod
	// would start within a fraction of a second.
	started := p.Status.ContainerStatuses[0].State.Running.StartedAt.Time
	if started.Sub(edited) < 2*time.Second {
		t.Errorf("the new pod started %s after the edit, before the old one finished its 3 s shutdown", started.Sub(edited))
	}
	pods, _ := n.pods()
	if len(pods) != 1 {
		t.Errorf("%d pods listed, want only the new one", len(pods))
	}
	if sbs, cs := n.runtimeObjects(string(old.UID)); len(sbs)+len(cs) > 0 {
		t.Error("the old pod is still in the runtime")
	}
}

func TestInitContainerFailure(t *testing.T) {
	n := newNode(t, "")
	pod := func(name, policy string) string {
		return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
spec:
  restartPolicy: %s
  terminationGracePeriodSeconds: 2
  initContainers:
  - name: init
    image: %s
    command: ["sh", "-c", "exit 2"]
  containers:
  - name: app
    image: %[3]s
    command: ["sleep", "3600"]
`, name, policy, testImage)
	}
	n.writeManifest("never.yaml", pod("never", "Never"))
	n.writeManifest("onfailure.yaml", pod("onfailure", "OnFailure"))
	n.start()
	n.waitPod("never", 60*time.Second, "failed", func(p *corev1.Pod) error {
		if p == nil || p.Status.Phase != corev1.PodFailed {
			return fmt.Errorf("phase %v", p)
		}
		if t := p.Status.InitContainerStatuses[0].State.Terminated; t == nil || t.ExitCode != 2 {
			return fmt.Errorf("init %+v", p.Status.InitContainerStatuses[0].State)
		}
		if w := p.Status.ContainerStatuses[0].State.Waiting; w == nil || w.Reason != "PodInitializing" {
			return fmt.Errorf("app %+v", p.Status.ContainerStatuses[0].State)
		}
		return nil
	})
	p := n.waitPod("onfailure", 60*time.Second, "restarting its init container", func(p *corev1.Pod) error {
		if p == nil || p.Status.InitContainerStatuses[0].RestartCount < 1 {
			return fmt.Errorf("not yet %v", p)
		}
		if p.Status.Phase != corev1.PodPending {
			return fmt.Errorf("phase %s", p.Status.Phase)
		}
		return nil
	})
	if p.Status.ContainerStatuses[0].ContainerID != "" {
		t.Error("the app container started although init never succeeded")
	}
	for _, name := range []string{"never", "onfailure"} {
		pp, _ := n.pod(name)
		_, cs := n.runtimeObjects(string(pp.UID))
		for _, c := range cs {
			if c.Metadata.Name == "app" {
				t.Errorf("%s: app container created before init succeeded", name)
			}
		}
	}
}

func TestHostNamespaces(t *testing.T) {
	n := newNode(t, "")
	n.writeManifest("host.yaml", strings.Replace(podManifest("host", ""), "spec:\n", "spec:\n  hostNetwork: true\n  hostPID: true\n", 1))
	n.start()
	p := n.waitRunning("host")
	node := n.nodeIP()
	if p.Status.PodIP != node {
		t.Errorf("hostNetwork pod IP %s, want the node's %s", p.Status.PodIP, node)
	}
	// With hostPID the container sees the host's PID 1, not its own process.
	if out, _ := n.execIn(p, "main", "sh", "-c", "cat /proc/1/comm"); strings.TrimSpace(out) == "sleep" {
		t.Errorf("hostPID: /proc/1 is the container's own process")
	}
	hosts, _ := n.execIn(p, "main", "head", "-1", "/etc/hosts")
	if !strings.Contains(hosts, "Kubernetes-managed hosts file (host network)") {
		t.Errorf("/etc/hosts of a host-network pod: %q", hosts)
	}
}

func (n *node) nodeIP() string {
	n.t.Helper()
	for _, a := range n.nodeObject().Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			return a.Address
		}
	}
	return ""
}
