package eviction

import (
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"

	"nodeagent/internal/qos"
)

// Pressure is the node's pressure conditions: set by the eviction manager
// when a threshold is met, held for the transition period, and read by
// node status and pod admission. It has its own lock, so admission never
// waits on an eviction round.
type Pressure struct {
	period time.Duration
	clock  clock.PassiveClock

	mu           sync.Mutex
	lastObserved map[corev1.NodeConditionType]time.Time
	transitions  map[corev1.NodeConditionType]transition
}

type transition struct {
	status bool
	since  time.Time
}

// NewPressure keeps a condition on for transitionPeriod after the last
// observation that met a threshold (evictionPressureTransitionPeriod).
func NewPressure(transitionPeriod time.Duration, clk clock.PassiveClock) *Pressure {
	return &Pressure{period: transitionPeriod, clock: clk,
		lastObserved: map[corev1.NodeConditionType]time.Time{}, transitions: map[corev1.NodeConditionType]transition{}}
}

// observe records that a threshold of condition c was met at now.
func (p *Pressure) observe(c corev1.NodeConditionType, now time.Time) {
	p.mu.Lock()
	p.lastObserved[c] = now
	p.mu.Unlock()
}

// Conditions are the node's pressure conditions, as the kubelet words them.
func (p *Pressure) Conditions(now time.Time) []corev1.NodeCondition {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []corev1.NodeCondition
	for _, c := range []struct {
		t                 corev1.NodeConditionType
		okReason, okMsg   string
		badReason, badMsg string
	}{
		{corev1.NodeMemoryPressure, "KubeletHasSufficientMemory", "nodeagent has sufficient memory available",
			"KubeletHasInsufficientMemory", "nodeagent has insufficient memory available"},
		{corev1.NodeDiskPressure, "KubeletHasNoDiskPressure", "nodeagent has no disk pressure",
			"KubeletHasDiskPressure", "nodeagent has disk pressure"},
		{corev1.NodePIDPressure, "KubeletHasSufficientPID", "nodeagent has sufficient PID available",
			"KubeletHasInsufficientPID", "nodeagent has insufficient PID available"},
	} {
		cond := corev1.NodeCondition{Type: c.t, Status: corev1.ConditionFalse, Reason: c.okReason, Message: c.okMsg, LastHeartbeatTime: metav1.NewTime(now)}
		if p.onLocked(c.t, now) {
			cond.Status, cond.Reason, cond.Message = corev1.ConditionTrue, c.badReason, c.badMsg
		}
		on := cond.Status == corev1.ConditionTrue
		if tr, ok := p.transitions[c.t]; !ok || tr.status != on {
			p.transitions[c.t] = transition{status: on, since: now}
		}
		cond.LastTransitionTime = metav1.NewTime(p.transitions[c.t].since)
		out = append(out, cond)
	}
	return out
}

func (p *Pressure) onLocked(c corev1.NodeConditionType, now time.Time) bool {
	last, ok := p.lastObserved[c]
	return ok && now.Sub(last) < p.period
}

// Admit is the kubelet's admission under pressure: critical pods always
// pass; under MemoryPressure alone only BestEffort pods are refused; under
// DiskPressure or PIDPressure every other pod is. It returns the rejection
// message, or "".
func (p *Pressure) Admit(pod *corev1.Pod) string {
	now := p.clock.Now()
	p.mu.Lock()
	var conds []string
	for _, c := range []corev1.NodeConditionType{corev1.NodeMemoryPressure, corev1.NodeDiskPressure, corev1.NodePIDPressure} {
		if p.onLocked(c, now) {
			conds = append(conds, string(c))
		}
	}
	p.mu.Unlock()
	if len(conds) == 0 || Critical(pod) {
		return ""
	}
	if len(conds) == 1 && conds[0] == string(corev1.NodeMemoryPressure) && qos.Class(pod) != corev1.PodQOSBestEffort {
		return ""
	}
	return fmt.Sprintf("The node had condition: [%s]. ", strings.Join(conds, ", "))
}
