package status

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestSubscribersHearOfStatusChangesOnly(t *testing.T) {
	s := NewStore()
	sub := s.Subscribe()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "u1"}, Status: corev1.PodStatus{Phase: corev1.PodPending}}
	s.Set(pod)
	if got := sub.Take(); !slices.Equal(got, []types.UID{"u1"}) {
		t.Fatalf("after the first Set: %v", got)
	}
	pod.Labels = map[string]string{"spec": "changed"} // not the status
	s.Set(pod)
	if got := sub.Take(); len(got) != 0 {
		t.Errorf("a Set with the same status told %v", got)
	}
	s.Update("u1", func(p *corev1.Pod) { p.Status.Phase = corev1.PodRunning })
	s.Update("u1", func(p *corev1.Pod) {}) // no change
	s.Update("gone", func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed })
	if got := sub.Take(); !slices.Equal(got, []types.UID{"u1"}) {
		t.Errorf("after Updates: %v, want u1 once", got)
	}
	s.Delete("u1")
	s.Delete("never-stored")
	if got := sub.Take(); !slices.Equal(got, []types.UID{"u1"}) {
		t.Errorf("after Delete: %v", got)
	}
	select {
	case <-sub.Ready():
	default:
		t.Error("Ready is not readable after a change")
	}
}
