//go:build integration

package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"nodeagent/eviction"
)

// evictionNode is a node whose pods may use 1 GiB in all (kubeReserved
// takes the rest of the memory) with a hard threshold 300 MiB below that,
// as the kubelet's MemoryAllocatableEviction test sets it up.
func evictionNode(t *testing.T, extra string) *node {
	reserved := memTotal(t) - 1<<30
	return newNode(t, fmt.Sprintf(`kubeReserved: {memory: "%d"}
evictionHard: {allocatableMemory.available: 300Mi}
evictionPressureTransitionPeriod: 30s
%s`, reserved, extra))
}

func hogPod(name, priority, resources string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s}
spec:
  terminationGracePeriodSeconds: 30
%s  containers:
  - name: main
    image: %s
    command: ["memhog", "--mb", "900", "--rate", "150"]
%s`, name, priority, testImage, resources)
}

// sleeperPod runs an idle shell with the container fields in resources.
func sleeperPod(name, resources string) string {
	return scriptPod(name, "", "while true; do sleep 1 & wait $!; done", resources)
}

const guaranteed = "    resources: {limits: {cpu: 100m, memory: 64Mi}}\n"

func (n *node) evictions() []eviction.Trace {
	n.t.Helper()
	var out []eviction.Trace
	n.getJSON("/evictions", &out)
	return out
}

func (n *node) condition(t corev1.NodeConditionType) corev1.NodeCondition {
	n.t.Helper()
	for _, c := range n.nodeObject().Status.Conditions {
		if c.Type == t {
			return c
		}
	}
	return corev1.NodeCondition{}
}

func (n *node) waitEvicted(name string) *corev1.Pod {
	n.t.Helper()
	return n.waitPod(name, 90*time.Second, "evicted", func(p *corev1.Pod) error {
		if p == nil || p.Status.Phase != corev1.PodFailed || p.Status.Reason != "Evicted" {
			return fmt.Errorf("%+v", p)
		}
		return nil
	})
}

// kubepodsOOMKills counts the kernel's OOM kills under kubepods.
func kubepodsOOMKills(t *testing.T, n *node) uint64 {
	return cgroupMemory(t, n.cgroupRoot+"/kubepods").OOMKills
}

func TestMemoryAllocatableEviction(t *testing.T) {
	n := evictionNode(t, "")
	n.writeManifest("innocent.yaml", sleeperPod("innocent", guaranteed))
	n.start()
	n.waitRunning("innocent")
	n.writeManifest("hog.yaml", hogPod("hog", "", ""))

	p := n.waitEvicted("hog")
	if !strings.HasPrefix(p.Status.Message, "The node was low on resource: memory. Threshold quantity: 300Mi, available: ") ||
		!strings.Contains(p.Status.Message, "Container main was using ") {
		t.Errorf("message %q: want the kubelet's, naming the container", p.Status.Message)
	}
	fams := n.metricFamilies()
	if v, _ := metricValue(fams, "kubelet_evictions", "eviction_signal=allocatableMemory.available"); v != 1 {
		t.Errorf("kubelet_evictions{eviction_signal=allocatableMemory.available} = %v, want 1", v)
	}
	if v, _ := metricValue(fams, "nodeagent_eviction_decision_seconds"); v < 1 {
		t.Errorf("nodeagent_eviction_decision_seconds count %v, want >= 1", v)
	}
	var disruption bool
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue && c.Reason == "TerminationByKubelet" {
			disruption = true
		}
	}
	if !disruption {
		t.Errorf("no DisruptionTarget condition: %+v", p.Status.Conditions)
	}
	// One Evicted event, annotated as the kubelet's (the upstream eviction
	// specs read these): the starved resource, the container over its
	// request and its usage.
	var evicted []corev1.Event
	for _, e := range n.events(string(p.UID)) {
		if e.Reason == "Evicted" {
			evicted = append(evicted, e)
		}
	}
	if len(evicted) != 1 || !strings.Contains(evicted[0].Message, "The node was low on resource: memory") {
		t.Errorf("Evicted events %+v, want one about memory", evicted)
	} else if a := evicted[0].Annotations; a["starved_resource"] != "memory" || a["offending_containers"] != "main" {
		t.Errorf("Evicted event annotations %v, want starved_resource memory and offending_containers main", a)
	} else if q, err := resource.ParseQuantity(a["offending_containers_usage"]); err != nil || q.Value() <= 0 {
		t.Errorf("offending_containers_usage %q: %v", a["offending_containers_usage"], err)
	}
	if c := n.condition(corev1.NodeMemoryPressure); c.Status != corev1.ConditionTrue || c.Reason != "KubeletHasInsufficientMemory" {
		t.Errorf("MemoryPressure %+v", c)
	}

	// Under MemoryPressure a BestEffort pod is refused, a Guaranteed one is not.
	n.writeManifest("late-be.yaml", sleeperPod("late-be", ""))
	n.writeManifest("late-g.yaml", sleeperPod("late-g", guaranteed))
	late := n.waitRejected("late-be")
	if late.Status.Reason != "Evicted" || late.Status.Message != "Pod was rejected: The node had condition: [MemoryPressure]. " {
		t.Errorf("BestEffort admission under pressure: reason %q message %q", late.Status.Reason, late.Status.Message)
	}
	n.waitRunning("late-g")

	// The innocent Guaranteed pod kept running and was never OOM-killed.
	inn := n.mustPod("innocent")
	if cs := inn.Status.ContainerStatuses[0]; cs.RestartCount != 0 || cs.State.Running == nil {
		t.Errorf("innocent pod: %+v", cs)
	}
	if got := kubepodsOOMKills(t, n); got != 0 {
		t.Errorf("the kernel OOM killer killed %d processes in kubepods", got)
	}
	tr := n.evictions()
	if len(tr) == 0 || tr[0].Signal != string(eviction.AllocatableMemoryAvailable) || len(tr[0].Victims) != 1 ||
		!strings.HasPrefix(tr[0].Victims[0].Pod, "default/hog-") || tr[0].Victims[0].QoS != corev1.PodQOSBestEffort || tr[0].Victims[0].Grace != 1 {
		t.Errorf("eviction traces %+v", tr)
	}
	// nodectl shows the trace.
	out, err := n.nodectl("get", "evictions")
	if err != nil || !strings.Contains(out, "evictionHard allocatableMemory.available<300Mi") || !strings.Contains(out, "hog-") {
		t.Errorf("nodectl get evictions: %v\n%s", err, out)
	}
}

func TestEvictionOrder(t *testing.T) {
	n := evictionNode(t, "")
	// Two BestEffort hogs of different priority and a Burstable pod under
	// its request: the low-priority hog goes first.
	n.writeManifest("innocent.yaml", sleeperPod("innocent", guaranteed))
	n.writeManifest("under.yaml", sleeperPod("under", "    resources: {requests: {memory: 200Mi}}\n"))
	n.start()
	n.waitRunning("innocent")
	n.waitRunning("under")
	low := strings.Replace(hogPod("low", "  priority: 10\n", ""), `"--mb", "900"`, `"--mb", "420"`, 1)
	high := strings.Replace(hogPod("high", "  priority: 1000\n", ""), `"--mb", "900"`, `"--mb", "420"`, 1)
	n.writeManifest("high.yaml", high)
	n.writeManifest("low.yaml", low)

	n.waitEvicted("low")
	if p := n.mustPod("high"); p.Status.Phase != corev1.PodRunning {
		t.Errorf("the high-priority hog went with the low one: %s %s", p.Status.Phase, p.Status.Reason)
	}
	for _, name := range []string{"innocent", "under"} {
		if p := n.mustPod(name); p.Status.Phase != corev1.PodRunning {
			t.Errorf("%s: %s %s", name, p.Status.Phase, p.Status.Message)
		}
	}
	if got := kubepodsOOMKills(t, n); got != 0 {
		t.Errorf("the kernel OOM killer killed %d processes in kubepods", got)
	}
}

func TestBadEvictionThresholdsAreRefused(t *testing.T) {
	n := newNode(t, "evictionHard: {memory.available: 200Ti}\n")
	out, err := n.runOnce()
	if err == nil || !strings.Contains(out, "evictionHard memory.available<200Ti is at or above the node's capacity") {
		t.Errorf("agent with memory.available<200Ti: %v\n%s", err, out)
	}
	n = newNode(t, "evictionSoft: {memory.available: 1Gi}\n")
	out, err = n.runOnce()
	if err == nil || !strings.Contains(out, `evictionSoft.memory.available: invalid value "1Gi": grace period must be specified`) {
		t.Errorf("soft threshold without grace: %v\n%s", err, out)
	}
}

func vmstatOOMKills(t *testing.T) string {
	b, err := os.ReadFile("/proc/vmstat")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "oom_kill ") {
			return l
		}
	}
	t.Fatal("no oom_kill in /proc/vmstat")
	return ""
}

// TestFastHogIsEvictedBeforeTheOOMKiller: a BestEffort pod allocating as
// fast as it can (well over 1 GiB/s here) crosses the 300 MiB headroom in
// a fraction of a second. The memcg threshold wakes the agent at the
// crossing, so the hog is gone before kubepods reaches its limit and no
// OOM kill happens anywhere on the node.
func TestFastHogIsEvictedBeforeTheOOMKiller(t *testing.T) {
	n := evictionNode(t, "")
	n.writeManifest("innocent.yaml", sleeperPod("innocent", guaranteed))
	n.start()
	n.waitRunning("innocent")
	before := vmstatOOMKills(t)
	n.writeManifest("hog.yaml", strings.Replace(hogPod("hog", "", ""), `"--rate", "150"`, `"--rate", "0"`, 1))
	n.waitEvicted("hog")
	if after := vmstatOOMKills(t); after != before {
		t.Errorf("kernel OOM kills on the node went from %q to %q", before, after)
	}
	tr := n.evictions()
	if len(tr) == 0 {
		t.Fatal("no eviction traced")
	}
	// The kernel checks memcg thresholds every 128 page charges (512 KiB):
	// the 1 s poll can land in that gap (seen once, in a whole-suite run:
	// 324 KiB past), which is still the crossing. Need is how far past.
	if tr[0].TriggeredBy != eviction.WokenByMemcgThreshold && tr[0].Need > 1<<20 {
		t.Fatalf("the decision was not woken at the crossing: not by the memcg threshold, and %d bytes past it: %+v", tr[0].Need, tr)
	}
	if tr[0].TriggeredBy == eviction.WokenByMemcgThreshold {
		t.Logf("memcg notification -> decided %v, -> kill sent %v", tr[0].DecidedAt.Sub(tr[0].TriggeredAt), tr[0].KillSentAt.Sub(tr[0].TriggeredAt))
	} else {
		t.Logf("the poll saw the crossing first, %d bytes past it, before the kernel's threshold check", tr[0].Need)
	}
	if p := n.mustPod("innocent"); p.Status.ContainerStatuses[0].RestartCount != 0 {
		t.Error("the innocent pod restarted")
	}
}

func writerPod(name, volume, script string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s}
spec:
  terminationGracePeriodSeconds: 2
  volumes: [{name: scratch, emptyDir: {%s}}]
  containers:
  - name: main
    image: %s
    command: ["sh", "-c", %q]
    volumeMounts: [{name: scratch, mountPath: /data}]
`, name, volume, testImage, script)
}

// TestDiskPressureEvictsTheWriter gives the agent a 256 MiB tmpfs as its
// root directory, so nodefs (where emptyDirs live) is small and private to
// the test, and a threshold at 40 % of it.
func TestDiskPressureEvictsTheWriter(t *testing.T) {
	n := newNode(t, "evictionHard: {nodefs.available: \"40%\"}\nevictionPressureTransitionPeriod: 30s\n")
	root := filepath.Join(n.dir, "root")
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=256m", "tmpfs", root).CombinedOutput(); err != nil {
		t.Fatalf("mount tmpfs: %v %s", err, out)
	}
	// The agent binds the root onto itself to make it shared (the tmpfs
	// is private): both come off, the bind first.
	t.Cleanup(func() {
		for i := 0; i < 4 && exec.Command("umount", "-l", root).Run() == nil; i++ {
		}
	})
	n.writeManifest("quiet.yaml", writerPod("quiet", "", "while true; do sleep 1 & wait $!; done"))
	// A pod that failed once, then succeeded: two dead containers, both
	// taken by the reclaim (its status stands without them).
	done := strings.Replace(writerPod("done", "", "[ -f /data/ran ] && exit 0; touch /data/ran; exit 1"), "spec:\n", "spec:\n  restartPolicy: OnFailure\n", 1)
	n.writeManifest("done.yaml", done)
	n.start()
	n.waitRunning("quiet")
	d := n.waitPod("done", 60*time.Second, "Succeeded after one failure", func(p *corev1.Pod) error {
		if p == nil {
			return fmt.Errorf("not listed yet")
		}
		if p.Status.Phase != corev1.PodSucceeded {
			return fmt.Errorf("phase %s", p.Status.Phase)
		}
		return nil
	})
	if d.Status.ContainerStatuses[0].RestartCount != 1 {
		t.Fatalf("done pod: restartCount %d, want 1", d.Status.ContainerStatuses[0].RestartCount)
	}
	// A finished pod's emptyDir is torn down, as the kubelet does.
	doneVolumes := filepath.Join(root, "pods", string(d.UID), "volumes", "kubernetes.io~empty-dir")
	n.eventually("the finished pod's emptyDir removed", 10*time.Second, func() error {
		if _, err := os.Stat(doneVolumes); !os.IsNotExist(err) {
			return fmt.Errorf("%s: %v", doneVolumes, err)
		}
		return nil
	})
	n.writeManifest("writer.yaml", writerPod("writer", "", "dd if=/dev/zero of=/data/fill bs=1M count=180; while true; do sleep 1 & wait $!; done"))
	p := n.waitEvicted("writer")
	if !strings.HasPrefix(p.Status.Message, "The node was low on resource: ephemeral-storage. ") {
		t.Errorf("message %q", p.Status.Message)
	}
	if c := n.condition(corev1.NodeDiskPressure); c.Status != corev1.ConditionTrue || c.Reason != "KubeletHasDiskPressure" {
		t.Errorf("DiskPressure %+v", c)
	}
	if q := n.mustPod("quiet"); q.Status.Phase != corev1.PodRunning {
		t.Errorf("the quiet pod went too: %s %s", q.Status.Phase, q.Status.Message)
	}
	tr := n.evictions()
	if len(tr) == 0 || tr[0].Signal != string(eviction.NodeFsAvailable) || !strings.HasPrefix(tr[0].Reclaimed, "removed 2 dead containers; removed ") {
		t.Errorf("trace %+v: want a nodefs decision after reclaiming the done pod's two containers, then images", tr)
	}
	_, containers := n.runtimeObjects(string(d.UID))
	if len(containers) != 0 {
		t.Errorf("the done pod has %d containers after the reclaim, want none (the kubelet removes a finished pod's)", len(containers))
	}
	if p := n.mustPod("done"); p.Status.Phase != corev1.PodSucceeded || p.Status.ContainerStatuses[0].State.Terminated == nil {
		t.Errorf("the done pod's status after the reclaim: %+v", p.Status)
	}
	// Under DiskPressure no pod is admitted.
	n.writeManifest("late.yaml", sleeperPod("late", guaranteed))
	if late := n.waitRejected("late"); late.Status.Message != "Pod was rejected: The node had condition: [DiskPressure]. " {
		t.Errorf("admission under DiskPressure: %q", late.Status.Message)
	}
	// The eviction gives the space back (the evicted pod's emptyDir goes),
	// and nothing more is evicted for it, also after the 30 s that an
	// eviction in flight is given.
	n.eventually("the writer's space freed", 20*time.Second, func() error {
		if tr := n.evictions(); len(tr) == 0 || tr[0].FreedAt.IsZero() {
			return fmt.Errorf("trace %+v", tr)
		}
		return nil
	})
	time.Sleep(32 * time.Second)
	if q := n.mustPod("quiet"); q.Status.Phase != corev1.PodRunning {
		t.Errorf("the quiet pod was evicted after the writer: %s %s", q.Status.Phase, q.Status.Message)
	}
	if tr := n.evictions(); len(tr) != 1 {
		t.Errorf("%d eviction decisions, want 1: %+v", len(tr), tr)
	}
}

// TestReclaimedLayerSpaceIsWaitedFor: a finished pod's writable layer
// holds the inodes that put the node under pressure. The reclaim removes
// its container, and containerd frees the layer at its next garbage
// collection, after the agent's re-read; the pod writing to its emptyDir
// must not be evicted for inodes on their way back (the upstream
// ImageGCTerminatedPodsContainersCleanup without images to remove).
func TestReclaimedLayerSpaceIsWaitedFor(t *testing.T) {
	var st unix.Statfs_t
	if err := unix.Statfs(os.TempDir(), &st); err != nil {
		t.Fatal(err)
	}
	// The free inodes of the agent's root (under the temp dir), which the
	// runtime's layers must share (checked below).
	threshold := int64(st.Ffree) - 40000
	n := newNode(t, fmt.Sprintf("evictionHard: {nodefs.inodesFree: \"%d\"}\nimageMinimumGCAge: 1h\nevictionPressureTransitionPeriod: 30s\n", threshold))
	fss, err := n.cri.ImageFsInfo(context.Background())
	if err != nil || len(fss) == 0 {
		t.Fatalf("the runtime's image filesystem: %v %v", fss, err)
	}
	var layers, agent unix.Stat_t
	if err := unix.Stat(fss[0].GetFsId().GetMountpoint(), &layers); err != nil {
		t.Fatal(err)
	}
	if err := unix.Stat(os.TempDir(), &agent); err != nil {
		t.Fatal(err)
	}
	if layers.Dev != agent.Dev {
		t.Fatalf("the runtime's layers (%s) are not on the agent's filesystem (%s): the test needs one filesystem for both, as a node without a separate image filesystem", fss[0].GetFsId().GetMountpoint(), os.TempDir())
	}
	files := func(dir string, count int) string {
		return fmt.Sprintf("mkdir -p %s && cd %s && i=0; while [ $i -lt %d ]; do : > f$i; i=$((i+1)); done", dir, dir, count)
	}
	// 30,000 inodes in the hog's layer, then 15,000 in the other's
	// emptyDir: over the 40,000 only together.
	hog := strings.Replace(writerPod("hog", "", files("/hog", 30000)), "spec:\n", "spec:\n  restartPolicy: Never\n", 1)
	n.writeManifest("hog.yaml", hog)
	n.start()
	h := n.waitPod("hog", 120*time.Second, "Succeeded", func(p *corev1.Pod) error {
		if p == nil || p.Status.Phase != corev1.PodSucceeded {
			return fmt.Errorf("not finished yet")
		}
		return nil
	})
	n.writeManifest("inodes.yaml", writerPod("inodes", "", files("/data/small", 15000)+"; while true; do sleep 1 & wait $!; done"))
	n.eventually("the hog's container reclaimed", 90*time.Second, func() error {
		if _, containers := n.runtimeObjects(string(h.UID)); len(containers) != 0 {
			return fmt.Errorf("%d containers left", len(containers))
		}
		if !strings.Contains(n.logText(), "signal=nodefs.inodesFree reclaimed=\"removed 1 dead containers; removed 0 unused images\"") {
			return fmt.Errorf("no reclaim logged")
		}
		return nil
	})
	n.eventually("the pressure relieved by the reclaim", 10*time.Second, func() error {
		log := n.logText()
		i := strings.Index(log, "the reclaimed space showed")
		if i < 0 {
			return fmt.Errorf("not logged")
		}
		t.Logf("%s", strings.SplitN(log[i:], "\n", 2)[0])
		return nil
	})
	// Longer than the wait the reclaim is given, so an eviction after it
	// would show.
	time.Sleep(12 * time.Second)
	if p := n.mustPod("inodes"); p.Status.Phase != corev1.PodRunning {
		t.Errorf("the emptyDir writer was evicted for the reclaimed layer's inodes: %s %s", p.Status.Phase, p.Status.Message)
	}
	if tr := n.evictions(); len(tr) != 0 {
		t.Errorf("eviction decisions %+v, want none: the reclaim relieved the pressure", tr)
	}
}

func TestEmptyDirOverItsSizeLimitIsEvicted(t *testing.T) {
	n := newNode(t, "")
	n.writeManifest("filler.yaml", writerPod("filler", "sizeLimit: 20Mi", "dd if=/dev/zero of=/data/fill bs=1M count=50; while true; do sleep 1 & wait $!; done"))
	n.writeManifest("within.yaml", writerPod("within", "sizeLimit: 20Mi", "dd if=/dev/zero of=/data/fill bs=1M count=5; while true; do sleep 1 & wait $!; done"))
	n.start()
	p := n.waitEvicted("filler")
	if p.Status.Message != `Usage of EmptyDir volume "scratch" exceeds the limit "20Mi". ` {
		t.Errorf("message %q", p.Status.Message)
	}
	if w := n.mustPod("within"); w.Status.Phase != corev1.PodRunning {
		t.Errorf("the pod within its limit: %s %s", w.Status.Phase, w.Status.Message)
	}
	if c := n.condition(corev1.NodeDiskPressure); c.Status != corev1.ConditionFalse {
		t.Errorf("an emptyDir over its limit is no node pressure: %+v", c)
	}
}

// TestBurstableOverRequestGoesFirst: two Burstable pods of the same
// priority; the one above its memory request is evicted, the one below
// stays, though it uses more memory in absolute terms.
func TestBurstableOverRequestGoesFirst(t *testing.T) {
	n := evictionNode(t, "")
	n.writeManifest("under.yaml", strings.Replace(hogPod("under", "", "    resources: {requests: {memory: 600Mi}}\n"), `"--mb", "900"`, `"--mb", "450"`, 1))
	n.start()
	n.waitRunning("under")
	time.Sleep(4 * time.Second) // let it reach its 450 MiB, under its 600 MiB request
	n.writeManifest("over.yaml", strings.Replace(hogPod("over", "", "    resources: {requests: {memory: 50Mi}}\n"), `"--mb", "900"`, `"--mb", "400"`, 1))
	p := n.waitEvicted("over")
	if !strings.Contains(p.Status.Message, "request is 50Mi, has larger consumption of memory") {
		t.Errorf("message %q", p.Status.Message)
	}
	if u := n.mustPod("under"); u.Status.Phase != corev1.PodRunning {
		t.Errorf("the pod under its request was evicted: %s %s", u.Status.Phase, u.Status.Message)
	}
}

// TestHardMemoryVictimIsKilledAtOnce: a hog that drains for 30 s on
// SIGTERM, allocating as fast as it can towards 2 GiB, twice what the pods
// may use. The kubelet's hard eviction would
// give it SIGTERM and a second (a gigabyte at this rate); the agent kills
// its processes through the pod cgroup as soon as it is chosen, so it
// dies of SIGKILL and the kernel OOM killer never acts. With
// --eviction-hard-memory-kill=runtime the pod worker stops it instead.
func TestHardMemoryVictimIsKilledAtOnce(t *testing.T) {
	for _, mode := range []string{"cgroup", "runtime"} {
		t.Run(mode, func(t *testing.T) {
			n := evictionNode(t, "")
			n.args = append(n.args, "--eviction-hard-memory-kill="+mode)
			n.start()
			before := vmstatOOMKills(t)
			n.writeManifest("hog.yaml", strings.Replace(hogPod("hog", "", ""), `"900", "--rate", "150"`, `"2048", "--rate", "0", "--term-grace", "30s"`, 1))
			p := n.waitEvicted("hog")
			tr := n.evictions()
			if len(tr) == 0 || len(tr[0].Victims) == 0 || !strings.Contains(tr[0].Victims[0].Pod, "/hog") {
				t.Fatalf("no eviction of the hog in the traces: %+v", tr)
			}
			v := tr[0].Victims[0]
			after := vmstatOOMKills(t)
			t.Logf("%s: kernel OOM kills %q -> %q", mode, before, after)
			if !v.KilledAt.IsZero() {
				t.Logf("%s: killed through the cgroup %v after the decision, %d processes signalled by the agent", mode, v.KilledAt.Sub(tr[0].DecidedAt), v.Sigkilled)
			}
			if st := p.Status.ContainerStatuses; len(st) == 1 && st[0].State.Terminated != nil {
				t.Logf("%s: the hog ended with exit code %d (%s)", mode, st[0].State.Terminated.ExitCode, st[0].State.Terminated.Reason)
			}
			if mode == "runtime" {
				if !v.KilledAt.IsZero() {
					t.Errorf("killed through the cgroup at %v with the runtime mode", v.KilledAt)
				}
				return
			}
			if v.KilledAt.IsZero() || v.KillError != "" {
				t.Errorf("victim %+v: want it killed through its cgroup", v)
			}
			if after != before {
				t.Errorf("kernel OOM kills on the node went from %q to %q", before, after)
			}
			if st := p.Status.ContainerStatuses; len(st) != 1 || st[0].State.Terminated == nil || st[0].State.Terminated.ExitCode != 137 {
				t.Errorf("container status %+v, want terminated by SIGKILL (137), not drained after SIGTERM", st)
			}
		})
	}
}
