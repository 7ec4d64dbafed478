package pods

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"nodeagent/agent/source"
	"nodeagent/cri/critest"
	"nodeagent/manifest"
)

// resourcePod is an API pod asking cpu and memory (limits too when guaranteed;
// nothing for "").
func resourcePod(uid string, cpu, mem string, guaranteed bool) *corev1.Pod {
	p := testPod(corev1.RestartPolicyAlways, "c")
	p.UID, p.Name = types.UID(uid), uid
	p.Annotations = map[string]string{manifest.AnnotationConfigSource: source.SourceAPI}
	if cpu != "" {
		l := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}
		p.Spec.Containers[0].Resources.Requests = l
		if guaranteed {
			p.Spec.Containers[0].Resources.Limits = l.DeepCopy()
		}
	}
	return p
}

func names(pods []*corev1.Pod) string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return strings.Join(out, " ")
}

// The kubelet's victim choice: Guaranteed pods only as needed with every
// other pod gone, then Burstable, then BestEffort; the closest fit first.
func TestPodsToPreempt(t *testing.T) {
	be := resourcePod("best-effort", "", "", false)
	burst := resourcePod("burstable", "100m", "100Mi", false)
	g1, g2 := resourcePod("guaranteed-1", "100m", "100Mi", true), resourcePod("guaranteed-2", "300m", "300Mi", true)
	all := []*corev1.Pod{be, burst, g1, g2}
	for _, tc := range []struct {
		name string
		reqs []requirement
		want string
	}{
		{"a Burstable pod's worth", []requirement{{corev1.ResourceCPU, 100}, {corev1.ResourceMemory, 100 << 20}}, "burstable"},
		{"more than Burstable holds: the closest Guaranteed too", []requirement{{corev1.ResourceCPU, 150}, {corev1.ResourceMemory, 150 << 20}}, "burstable guaranteed-1"},
		{"the big one fits alone", []requirement{{corev1.ResourceCPU, 350}}, "burstable guaranteed-2"},
		{"a pod slot: BestEffort goes", []requirement{{corev1.ResourcePods, 1}}, "best-effort"},
	} {
		got, err := podsToPreempt(all, tc.reqs)
		if err != nil || names(got) != tc.want {
			t.Errorf("%s: %q (%v), want %q", tc.name, names(got), err, tc.want)
		}
	}
	_, err := podsToPreempt(all, []requirement{{corev1.ResourceCPU, 1000}})
	if err == nil || err.Error() != "no set of running pods found to reclaim resources: [(res: cpu, q: 500), ]" {
		t.Errorf("not enough to preempt: %v", err)
	}
}

// Who is critical and who may be preempted, as the kubelet says.
func TestCriticalAndPreemptable(t *testing.T) {
	api := resourcePod("a", "", "", false)
	static := resourcePod("s", "", "", false)
	static.Annotations[manifest.AnnotationConfigSource] = "file"
	high := resourcePod("h", "", "", false)
	high.Spec.Priority = ptr.To[int32](2000001000)
	low := resourcePod("l", "", "", false)
	low.Spec.Priority = ptr.To[int32](10)
	mid := resourcePod("m", "", "", false)
	mid.Spec.Priority = ptr.To[int32](100)
	if criticalPod(api) || !criticalPod(static) || !criticalPod(high) {
		t.Error("critical: want static and system-critical priority only")
	}
	if !preemptable(high, api) || preemptable(high, static) || !preemptable(mid, low) || preemptable(low, mid) || preemptable(api, low) {
		t.Error("preemptable differs from the kubelet's")
	}
}

// A critical pod that does not fit is admitted: the chosen pods are told
// to stop as preempted, the pod waits until they run nothing, and a pod
// that is not critical is refused as before. Pods on their way out no
// longer count.
func TestCriticalPodPreempts(t *testing.T) {
	m, _ := newTestManager(t, critest.New(), nil)
	m.opts.MaxPods = 110
	m.opts.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")}
	var signals []string
	m.preempted = func(s string) { signals = append(signals, s) }
	m.mu.Lock()
	defer m.mu.Unlock()
	victims := map[types.UID]*worker{}
	for _, p := range []*corev1.Pod{resourcePod("best-effort", "", "", false), resourcePod("burstable", "300m", "300Mi", false), resourcePod("guaranteed", "600m", "600Mi", true)} {
		m.pods[p.UID] = p
		w := newWorker(m, p.UID, p)
		m.workers[p.UID] = w
		victims[p.UID] = w
	}
	plain := resourcePod("plain", "500m", "500Mi", false)
	if r := m.admitResourcesLocked(plain, nil); r == nil || r.Reason != "OutOfcpu" {
		t.Fatalf("a plain pod that does not fit: %+v", r)
	}
	critical := resourcePod("critical", "500m", "500Mi", true)
	critical.Spec.Priority = ptr.To[int32](2000001000)
	if r := m.admitResourcesLocked(critical, nil); r != nil {
		t.Fatalf("the critical pod was refused: %+v", r)
	}
	m.preemptPlannedLocked(critical)
	// 400m and 376Mi short: the Guaranteed pod alone frees that, where
	// the Burstable one would need it too.
	if f := victims["guaranteed"].failure; f == nil || f.Reason != "Preempting" || f.Message != "Preempted in order to admit critical pod" ||
		f.Disruption != "Pod was preempted by Kubelet to accommodate a critical pod." || f.Event != "Preempting" {
		t.Errorf("the Guaranteed pod: %+v", f)
	}
	if victims["burstable"].failure != nil || victims["best-effort"].failure != nil {
		t.Error("more than the Guaranteed pod preempted")
	}
	if len(signals) != 1 || signals[0] != "cpu" {
		t.Errorf("kubelet_preemptions signals %v, want [cpu]", signals)
	}
	if !m.waitsForVictimsLocked(critical) {
		t.Error("the critical pod does not wait for its victim")
	}
	if names(m.admittedLocked()) == "" || strings.Contains(names(m.admittedLocked()), "guaranteed") {
		t.Errorf("admitted %q: the preempted pod still counts", names(m.admittedLocked()))
	}
	if until := m.preempt.until[critical.UID]; time.Until(until) < 44*time.Second {
		t.Errorf("waits until %v, want 1.5 times the victim's 30 s grace period", until)
	}
	m.victimStoppedLocked("guaranteed")
	if m.waitsForVictimsLocked(critical) {
		t.Error("still waiting once the victim stopped")
	}
	// A victim that never stops: the critical pod starts after the wait.
	m.preempt.waiting[critical.UID] = map[types.UID]bool{"stuck": true}
	m.preempt.until[critical.UID] = time.Now().Add(-time.Second)
	m.expirePreemptionWaitsLocked()
	if m.waitsForVictimsLocked(critical) {
		t.Error("still waiting past the deadline")
	}

	// Nothing left to preempt for this much: refused in the kubelet's words.
	huge := resourcePod("huge", "4", "1Gi", true)
	huge.Spec.Priority = ptr.To[int32](2000001000)
	if r := m.admitResourcesLocked(huge, nil); r == nil || r.Reason != "UnexpectedAdmissionError" ||
		!strings.HasPrefix(r.Message, "Unexpected error while attempting to recover from admission failure: preemption: error finding a set of pods to preempt: no set of running pods found to reclaim resources: [(res: cpu, ") {
		t.Errorf("too big to fit by preemption: %+v", r)
	}
}

// While the node shuts down, new pods are refused in the kubelet's words.
func TestShuttingDownRefusesPods(t *testing.T) {
	m, store := newTestManager(t, critest.New(), nil)
	m.shuttingDown = func() bool { return true }
	p := resourcePod("late", "", "", false)
	c := &p.Spec.Containers[0]
	c.ImagePullPolicy, c.TerminationMessagePolicy, c.TerminationMessagePath = corev1.PullIfNotPresent, corev1.TerminationMessageReadFile, "/dev/termination-log"
	p.Spec.SchedulerName, p.Spec.SecurityContext = "default-scheduler", &corev1.PodSecurityContext{}
	m.apply(source.Update{Source: source.SourceAPI, Pods: []*corev1.Pod{p}}, true)
	got, ok := store.Get(p.UID)
	if !ok || got.Status.Phase != corev1.PodFailed || got.Status.Reason != "NodeShutdown" ||
		got.Status.Message != "Pod was rejected: Pod was rejected as the node is shutting down." {
		t.Errorf("status %+v", got.Status)
	}
}
