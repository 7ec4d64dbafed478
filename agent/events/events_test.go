package events

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestRecorderFoldsRepeatsAndBoundsMemory(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Unix(100, 0))
	r := NewRecorder(clk, "n1", 3)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: "u"}}
	pod.Spec.InitContainers = []corev1.Container{{Name: "init"}}

	r.Event(PodRef(pod, "app"), corev1.EventTypeWarning, "BackOff", "Back-off restarting failed container app in pod p")
	clk.SetTime(time.Unix(110, 0))
	r.Event(PodRef(pod, "app"), corev1.EventTypeWarning, "BackOff", "Back-off restarting failed container app in pod p")
	list := r.List()
	if len(list) != 1 || list[0].Count != 2 || list[0].LastTimestamp.Unix() != 110 || list[0].FirstTimestamp.Unix() != 100 {
		t.Fatalf("repeat not folded: %+v", list)
	}
	e := list[0]
	if e.InvolvedObject.FieldPath != "spec.containers{app}" || e.Source.Component != "kubelet" || e.Source.Host != "n1" || e.Type != "Warning" {
		t.Errorf("event fields: %+v", e)
	}
	if ref := PodRef(pod, "init"); ref.FieldPath != "spec.initContainers{init}" {
		t.Errorf("init container field path %q", ref.FieldPath)
	}

	for i := 0; i < 5; i++ {
		clk.SetTime(time.Unix(int64(200+i), 0))
		r.Eventf(PodRef(pod, ""), corev1.EventTypeNormal, "Pulled", "event %d", i)
	}
	list = r.List()
	if len(list) != 3 || list[0].Message != "event 2" || list[2].Message != "event 4" {
		t.Fatalf("capacity not kept: %+v", list)
	}
	// A dropped event starts over instead of folding into a ghost.
	r.Event(PodRef(pod, "app"), corev1.EventTypeWarning, "BackOff", "Back-off restarting failed container app in pod p")
	if list = r.List(); list[len(list)-1].Count != 1 {
		t.Errorf("re-recorded event count %d", list[len(list)-1].Count)
	}
}

// What a container said (a probe's output) goes whole to the API server,
// as the kubelet's events do, and redacted into the events the read-only
// port serves.
func TestEventOutputIsRedactedLocally(t *testing.T) {
	var forwarded []string
	r := NewForwardingRecorder(clocktesting.NewFakePassiveClock(time.Unix(100, 0)), "n1", 10, func(_ corev1.ObjectReference, _ map[string]string, _, _, message string) {
		forwarded = append(forwarded, message)
	})
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: "u"}}
	r.EventOutput(PodRef(pod, "app"), corev1.EventTypeWarning, "Unhealthy", `Liveness probe failed: command "cat" exited with 1: `, "password=s3cret")
	r.EventOutput(PodRef(pod, "app"), corev1.EventTypeWarning, "Unhealthy", "Liveness probe failed: HTTP probe failed with statuscode: 500", "")
	want := []string{`Liveness probe failed: command "cat" exited with 1: password=s3cret`, "Liveness probe failed: HTTP probe failed with statuscode: 500"}
	if len(forwarded) != 2 || forwarded[0] != want[0] || forwarded[1] != want[1] {
		t.Errorf("forwarded %q, want %q", forwarded, want)
	}
	list := r.List()
	if len(list) != 2 || list[0].Message != `Liveness probe failed: command "cat" exited with 1: (redacted)` || list[1].Message != want[1] {
		t.Errorf("kept %+v", list)
	}
}

// An annotated event (Evicted) keeps its annotations, here and on the way
// to the API server.
func TestAnnotatedEvent(t *testing.T) {
	var got map[string]string
	r := NewForwardingRecorder(clocktesting.NewFakePassiveClock(time.Unix(100, 0)), "n1", 10, func(_ corev1.ObjectReference, a map[string]string, _, _, _ string) {
		got = a
	})
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: "u"}}
	a := map[string]string{"starved_resource": "memory", "offending_containers": "app", "offending_containers_usage": "300Mi"}
	r.AnnotatedEvent(PodRef(pod, ""), a, corev1.EventTypeWarning, "Evicted", "The node was low on resource: memory. ")
	if got["starved_resource"] != "memory" {
		t.Errorf("forwarded annotations %v", got)
	}
	a["starved_resource"] = "changed"
	list := r.List()
	if len(list) != 1 || list[0].Annotations["starved_resource"] != "memory" || list[0].Annotations["offending_containers_usage"] != "300Mi" {
		t.Errorf("kept %+v", list)
	}
}
