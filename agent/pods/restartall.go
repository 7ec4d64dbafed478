package pods

// RestartAllContainers (KEP-5307, beta in 1.36): a container that exits
// with a code its RestartAllContainers rule matches has every container of
// the pod stopped and removed, and the pod starts again in its sandbox,
// init containers first, as the kubelet does.

import (
	"context"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"nodeagent/agent/pleg"
	"nodeagent/cri"
)

// The kubelet's words for a container removed by the reset.
const (
	reasonRestartingAll  = "RestartingAllContainers"
	messageRestartingAll = "The container is removed because RestartAllContainers in place"
)

// resetStep is one container record the reset removes, stopping it first
// when it still runs.
type resetStep struct {
	rec  *runtimeapi.ContainerStatus
	kill bool
}

// resetRecord is what a container removed by the reset leaves for its
// status and its next start: its restart count and last state.
type resetRecord struct {
	restartCount int32
	last         *corev1.ContainerStateTerminated
}

// allContainersCouldRestart is the kubelet's AllContainersCouldRestart: a
// pod with such a rule has the AllContainersRestarting condition.
func allContainersCouldRestart(pod *corev1.Pod) bool {
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			for _, r := range cs[i].RestartPolicyRules {
				if r.Action == corev1.ContainerRestartRuleActionRestartAllContainers {
					return true
				}
			}
		}
	}
	return false
}

// restartable is whether a container's termination is not its last: its
// restart rules or policies start it again, or a RestartAllContainers
// reset removed it (the kubelet's getPhase counts those as restartable).
func restartable(pod *corev1.Pod, c *corev1.Container, t *corev1.ContainerStateTerminated) bool {
	return t.Reason == reasonRestartingAll || containerShouldRestart(pod, c, t.ExitCode)
}

// restartsAll reports whether an exit code of c's triggers the reset.
func restartsAll(c *corev1.Container, rec *runtimeapi.ContainerStatus) bool {
	if rec.State != runtimeapi.ContainerState_CONTAINER_EXITED {
		return false
	}
	r, ok := matchingRestartRule(c, rec.ExitCode)
	return ok && r.Action == corev1.ContainerRestartRuleActionRestartAllContainers
}

// resetSteps are the records to remove when the newest record of an init
// or app container in the sandbox (created at sandboxCreated) exited with
// a code its rule matches; nil when none did. Every record of every init
// and app container goes, in the kubelet's order: the app containers, the
// init containers, then the records that triggered it (app, then init),
// so that an agent cut off halfway finds the trigger again.
func (s podState) resetSteps(sandboxCreated int64) []resetStep {
	pod, rt := s.pod, s.rt
	triggered := false
	groups := [][]corev1.Container{pod.Spec.Containers, pod.Spec.InitContainers}
	for _, cs := range groups {
		for i := range cs {
			if recs := rt.ContainersNamed(cs[i].Name); len(recs) > 0 && recs[0].CreatedAt >= sandboxCreated && restartsAll(&cs[i], recs[0]) {
				triggered = true
			}
		}
	}
	if !triggered {
		return nil
	}
	var targets, sources []resetStep
	for _, cs := range groups {
		for i := range cs {
			for _, rec := range rt.ContainersNamed(cs[i].Name) {
				if restartsAll(&cs[i], rec) {
					sources = append(sources, resetStep{rec: rec})
				} else {
					targets = append(targets, resetStep{rec: rec, kill: rec.State != runtimeapi.ContainerState_CONTAINER_EXITED})
				}
			}
		}
	}
	return append(targets, sources...)
}

// resetGrace is the kubelet's minimum grace period, which its reset uses
// (no preStop hook runs).
const resetGrace = 2

// restartAll carries out the reset: it remembers each container's restart
// count and last state, then stops and removes the records in order. The
// sandbox, its network and the pod's volumes stay.
func (w *worker) restartAll(ctx context.Context, pod *corev1.Pod, steps []resetStep, podIP string) error {
	if w.resets == nil {
		w.resets = map[string]resetRecord{}
	}
	last := &corev1.ContainerStateTerminated{ExitCode: 137, Reason: reasonRestartingAll, Message: messageRestartingAll}
	for _, st := range steps {
		name := st.rec.GetMetadata().GetName()
		n, err := strconv.Atoi(st.rec.GetAnnotations()[cri.AnnotationRestartCount])
		if r, ok := w.resets[name]; err == nil && (!ok || int32(n) >= r.restartCount) {
			w.resets[name] = resetRecord{restartCount: int32(n), last: last}
		}
	}
	w.event("", corev1.EventTypeNormal, "RestartAllContainers", "container exited with restart policy rule: restarting all containers")
	// The first failure stops the reset, as the kubelet's: the records that
	// triggered it go last, so the next sync finds them and goes on.
	for _, st := range steps {
		if st.kill {
			w.actions++
			if err := w.stopContainer(ctx, st.rec, resetGrace, podIP, "killing"); err != nil {
				return err
			}
		}
		w.actions++
		if err := w.m.removeContainer(ctx, st.rec); err != nil {
			return fmt.Errorf("remove container %s: %w", st.rec.GetMetadata().GetName(), err)
		}
	}
	return nil
}

// restartingCondition is the kubelet's AllContainersRestarting: True from
// the trigger until every container is removed, for pods with such a rule.
func restartingCondition(pod *corev1.Pod, st *corev1.PodStatus, restarting bool, previous []corev1.PodCondition, now time.Time) {
	if !allContainersCouldRestart(pod) {
		return
	}
	reason := ""
	switch st.Phase {
	case corev1.PodSucceeded:
		reason, restarting = "PodCompleted", false
	case corev1.PodFailed:
		reason, restarting = "PodFailed", false
	}
	setCondition(st, previous, now, corev1.AllContainersRestarting, restarting, reason, "")
	for i := range st.Conditions {
		if c := &st.Conditions[i]; c.Type == corev1.AllContainersRestarting && restarting {
			c.Reason, c.Message = "RestartAllContainersStarted", "container exited with restart policy rule"
		}
	}
}

// resetAllContainers runs the reset and publishes the pod restarting
// before it (AllContainersRestarting True, as long as a sync finds the
// trigger: sync sets resetting) and after; the next sync, at once, starts
// the pod again in its sandbox.
func (w *worker) resetAllContainers(ctx context.Context, pod *corev1.Pod, rt *pleg.PodRuntime, steps []resetStep) (time.Duration, error) {
	w.publish(rt)
	w.log.Info("a container exited with a RestartAllContainers rule; restarting all containers", "records", len(steps))
	if err := w.restartAll(ctx, pod, steps, w.targetIP(rt.LatestSandbox().GetNetwork().GetIp())); err != nil {
		return 0, fmt.Errorf("restart all containers: %w", err)
	}
	w.resetting = false
	return time.Millisecond, nil
}
