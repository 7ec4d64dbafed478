//go:build integration

package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// A critical pod that does not fit preempts, as the kubelet: the pod of
// lower priority is stopped, ends Failed with reason Preempting (a static
// pod stays Failed though its container exits 0, kubernetes#116484), a
// DisruptionTarget condition and a Preempting event, and the critical pod
// runs once it has stopped.
func TestCriticalPodPreemptsAtAdmission(t *testing.T) {
	n := newNode(t, "")
	n.start()
	alloc := n.nodeObject().Status.Allocatable[corev1.ResourceCPU]
	low := alloc.MilliValue() - 500
	if low < 500 {
		t.Skipf("allocatable cpu %s leaves no room for the test's pods", alloc.String())
	}
	loop := "while true; do sleep 1 & wait $!; done"
	n.writeManifest("low.yaml", scriptPod("low", "  priority: 1000\n", "trap 'exit 0' TERM; "+loop,
		fmt.Sprintf("    resources: {requests: {cpu: %dm}}\n", low)))
	n.waitRunning("low")
	n.writeManifest("critical.yaml", scriptPod("critical", "  priority: 2000001000\n", loop, "    resources: {requests: {cpu: \"1\"}}\n"))
	n.waitRunning("critical")

	p := n.waitPod("low", 30*time.Second, "preempted", func(p *corev1.Pod) error {
		if p == nil || p.Status.Phase != corev1.PodFailed || p.Status.Reason != "Preempting" || p.Status.Message != "Preempted in order to admit critical pod" {
			return fmt.Errorf("not Failed as preempted: %+v", p)
		}
		return nil
	})
	var disruption *corev1.PodCondition
	for i, c := range p.Status.Conditions {
		if c.Type == corev1.DisruptionTarget {
			disruption = &p.Status.Conditions[i]
		}
	}
	if disruption == nil || disruption.Reason != "TerminationByKubelet" || disruption.Message != "Pod was preempted by Kubelet to accommodate a critical pod." {
		t.Errorf("DisruptionTarget %+v", disruption)
	}
	if !n.hasEvent(p, "Preempting", "Preempted in order to admit critical pod") {
		t.Errorf("no Preempting event: %+v", n.events(string(p.UID)))
	}
	if v, _ := metricValue(n.metricFamilies(), "kubelet_preemptions", "preemption_signal=cpu"); v != 1 {
		t.Errorf("kubelet_preemptions{preemption_signal=cpu} = %v, want 1", v)
	}
	if strings.Contains(n.logText(), "panic") {
		t.Error("the agent panicked")
	}
}
