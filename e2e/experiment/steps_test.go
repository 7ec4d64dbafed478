package experiment

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestBadStepsAreRefusedWithTheFieldPath(t *testing.T) {
	base := "name: x\nduration: 10s\nagent: {podsMemory: 1Gi}\npods: [{name: hog, requests: {memory: 64Mi}, limits: {memory: 256Mi}}, {name: g, requests: {cpu: 1, memory: 1Mi}, limits: {cpu: 1, memory: 1Mi}}]\n"
	for _, tc := range []struct{ body, want string }{
		{base + "steps: [{at: 20s, resize: {pods: hog, limits: {memory: 128Mi}}}]\n", "steps[0].at: 20s: must be within the duration 10s"},
		{base + "steps: [{at: 2s}]\n", "steps[0]: no action: want resize"},
		{base + "steps: [{at: 2s, resize: {pods: nope, limits: {memory: 128Mi}}}]\n", `steps[0].resize.pods: "nope": no pod group of that name`},
		{base + "steps: [{at: 2s, resize: {pods: hog, limits: {ephemeral-storage: 1Gi}}}]\n", "steps[0].resize.limits.ephemeral-storage: only cpu and memory resize in place"},
		{base + "steps: [{at: 2s, resize: {pods: hog, limits: {memory: 32Mi}}}]\n", "steps[0].resize: the memory request 64Mi would be more than its limit 32Mi"},
		{base + "steps: [{at: 2s, resize: {pods: g, limits: {cpu: 2}}}]\n", "steps[0].resize: would make Guaranteed pods Burstable: the QoS class may not change"},
		{base + "steps: [{at: 2s, resize: {pods: hog}}]\n", "steps[0].resize: names no request or limit"},
	} {
		file := filepath.Join(t.TempDir(), "s.yaml")
		os.WriteFile(file, []byte(tc.body), 0o644)
		if _, err := Load(file, nodeMemory); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err = %v, want %q", tc.body, err, tc.want)
		}
	}
}

// fakeResizer is a peer whose pods resize at once.
type fakeResizer struct {
	mu      sync.Mutex
	resized map[string]*Resize
	fail    bool
}

func (f *fakeResizer) node() string                   { return "n" }
func (f *fakeResizer) podsCgroupRoot() string         { return "" }
func (f *fakeResizer) apply(*corev1.Pod) error        { return nil }
func (f *fakeResizer) pid() int                       { return 0 }
func (f *fakeResizer) collect(*Run) error             { return nil }
func (f *fakeResizer) removePods(time.Duration) error { return nil }
func (f *fakeResizer) stop()                          {}

func (f *fakeResizer) resize(_ context.Context, pod string, r *Resize) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail {
		return os.ErrPermission
	}
	f.resized[pod] = r
	return nil
}

func (f *fakeResizer) pods() ([]corev1.Pod, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []corev1.Pod
	for name, r := range f.resized {
		out = append(out, corev1.Pod{ObjectMeta: metav1ObjectMeta(name), Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{
			{Name: "main", Resources: &corev1.ResourceRequirements{Limits: r.Limits, Requests: r.Requests}}}}})
	}
	return out, nil
}

// Every pod of the group is resized at the step's time, and the record
// says when its status showed it; a peer that cannot resize says why.
func TestStepsResizeEveryPodOfTheGroupAndRecordIt(t *testing.T) {
	s := &Scenario{Duration: durationOf(5 * time.Second), Steps: []Step{{At: durationOf(100 * time.Millisecond),
		Resize: &Resize{Pods: "hog", Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")}}}}}
	instances := map[string]Pod{"hog-1": {Name: "hog"}, "hog-2": {Name: "hog"}, "other": {Name: "other"}}
	f := &fakeResizer{resized: map[string]*Resize{}}
	var recs []StepRecord
	start := time.Now()
	runSteps(context.Background(), s, f, start, instances, func(r StepRecord) { recs = append(recs, r) })
	if len(recs) != 2 || recs[0].Pod != "hog-1" || recs[1].Pod != "hog-2" || f.resized["other"] != nil {
		t.Fatalf("records %+v, resized %v", recs, f.resized)
	}
	for _, r := range recs {
		if r.T < 0.1 || r.Error != "" || r.Done < r.T || !strings.Contains(r.What, "memory=128Mi") {
			t.Errorf("record %+v", r)
		}
	}
	if text := stepsText(recs); !strings.Contains(text, "resize hog-1 (requests -, limits memory=128Mi): in the pod's status") {
		t.Errorf("report lines:\n%s", text)
	}
	f.fail, recs = true, nil
	runSteps(context.Background(), s, f, time.Now(), instances, func(r StepRecord) { recs = append(recs, r) })
	if len(recs) != 2 || recs[0].Error == "" {
		t.Errorf("a failed resize is not recorded as failed: %+v", recs)
	}
}

func durationOf(d time.Duration) metav1.Duration { return metav1.Duration{Duration: d} }

func metav1ObjectMeta(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Name: name} }
