package experiment

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"nodeagent/internal/qos"
)

// Step is something the runner does to the pods while a run goes on, at a
// time after they were applied.
type Step struct {
	At     metav1.Duration `json:"at"`
	Resize *Resize         `json:"resize,omitempty"`
}

// Resize resizes every pod of a group in place, as `kubectl patch
// --subresource resize`: the requests and limits named replace the
// container's, the others stay. The pods then run in the API server,
// bound to the agent's node (static pods cannot be resized).
type Resize struct {
	Pods     string              `json:"pods"`
	Requests corev1.ResourceList `json:"requests,omitempty"`
	Limits   corev1.ResourceList `json:"limits,omitempty"`
}

// StepRecord is a step as a run did it, in seconds since the start.
type StepRecord struct {
	T    float64 `json:"t"`
	Step string  `json:"step"` // resize
	Pod  string  `json:"pod"`
	What string  `json:"what"`
	// Done is when the agent's pod list first showed the new resources
	// in the container's status (0: not within 10 s); Error is why the
	// step failed.
	Done  float64 `json:"done,omitempty"`
	Error string  `json:"error,omitempty"`
}

func (r *Resize) String() string {
	return fmt.Sprintf("requests %s, limits %s", resources(r.Requests), resources(r.Limits))
}

// resized is p with the resize's resources merged in.
func (r *Resize) resized(p Pod) Pod {
	p.Requests, p.Limits = p.Requests.DeepCopy(), p.Limits.DeepCopy()
	merge := func(into, from corev1.ResourceList) corev1.ResourceList {
		if into == nil && len(from) > 0 {
			into = corev1.ResourceList{}
		}
		for name, q := range from {
			into[name] = q
		}
		return into
	}
	p.Requests, p.Limits = merge(p.Requests, r.Requests), merge(p.Limits, r.Limits)
	return p
}

// NeedsAPIServer reports whether a step resizes pods: the runs then start
// a control plane, and the agent's pods are the API server's.
func (s *Scenario) NeedsAPIServer() bool {
	for _, st := range s.Steps {
		if st.Resize != nil {
			return true
		}
	}
	return false
}

// validateSteps checks each step against the scenario's pods: within the
// duration, one action, a known group, cpu and memory only, and the QoS
// class kept (the API server refuses a resize that changes it).
func (s *Scenario) validateSteps(nodeMemory int64, bad func(path, format string, args ...any)) {
	groups := map[string]Pod{}
	for _, p := range s.Pods {
		groups[p.Name] = p
	}
	for i, st := range s.Steps {
		path := fmt.Sprintf("steps[%d]", i)
		if st.At.Duration <= 0 || st.At.Duration >= s.Duration.Duration {
			bad(path+".at", "%s: must be within the duration %s", st.At.Duration, s.Duration.Duration)
		}
		r := st.Resize
		if r == nil {
			bad(path, "no action: want resize")
			continue
		}
		p, ok := groups[r.Pods]
		if !ok {
			bad(path+".resize.pods", "%q: no pod group of that name", r.Pods)
			continue
		}
		if len(r.Requests)+len(r.Limits) == 0 {
			bad(path+".resize", "names no request or limit")
		}
		for field, l := range map[string]corev1.ResourceList{"requests": r.Requests, "limits": r.Limits} {
			for name := range l {
				if name != corev1.ResourceCPU && name != corev1.ResourceMemory {
					bad(path+".resize."+field+"."+string(name), "only cpu and memory resize in place")
				}
			}
		}
		after := r.resized(p)
		for name, q := range after.Requests {
			if l, ok := after.Limits[name]; ok && q.Cmp(l) > 0 {
				bad(path+".resize", "the %s request %s would be more than its limit %s", name, q.String(), l.String())
			}
		}
		if mem, ok := after.Limits[corev1.ResourceMemory]; ok && mem.Value() > nodeMemory {
			bad(path+".resize.limits.memory", "%s: more than the node's %s", mem.String(), quantity(nodeMemory))
		}
		if before, now := qos.Class(p.pod("x", "")), qos.Class(after.pod("x", "")); before != now {
			bad(path+".resize", "would make %s pods %s: the QoS class may not change", before, now)
		}
	}
}

// resizer is a peer whose pods can be resized in place: one joined to the
// API server.
type resizer interface {
	resize(ctx context.Context, pod string, r *Resize) error
}

// resizeAPIPod patches the pod's resize subresource.
func resizeAPIPod(ctx context.Context, client kubernetes.Interface, pod string, r *Resize) error {
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"containers": []map[string]any{{
		"name": "main", "resources": map[string]any{"requests": r.Requests, "limits": r.Limits}}}}})
	if err != nil {
		return err
	}
	_, err = client.CoreV1().Pods(apiNamespace).Patch(ctx, pod, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "resize")
	return err
}

// runSteps does the scenario's steps at their times, on every pod of the
// named group, and records them; it returns when all are done or ctx ends.
func runSteps(ctx context.Context, s *Scenario, a peer, start time.Time, instances map[string]Pod, record func(StepRecord)) {
	steps := append([]Step(nil), s.Steps...)
	sort.SliceStable(steps, func(i, j int) bool { return steps[i].At.Duration < steps[j].At.Duration })
	for _, st := range steps {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(start.Add(st.At.Duration))):
		}
		var names []string
		for name, p := range instances {
			if p.Name == st.Resize.Pods {
				names = append(names, name)
			}
		}
		sort.Strings(names)
		for _, name := range names {
			rec := StepRecord{T: time.Since(start).Seconds(), Step: "resize", Pod: name, What: st.Resize.String()}
			rz, ok := a.(resizer)
			err := errors.New("this agent's pods cannot be resized in place")
			if ok {
				err = rz.resize(ctx, name, st.Resize)
			}
			if err != nil {
				rec.Error = err.Error()
			} else {
				rec.Done = waitResized(ctx, a, name, st.Resize, start)
			}
			record(rec)
		}
	}
}

// waitResized is when the agent's pod list first shows the container
// running with the resized resources (0: not within 10 s).
func waitResized(ctx context.Context, a peer, name string, r *Resize, start time.Time) float64 {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if pods, err := a.pods(); err == nil {
			for _, p := range pods {
				if podGroupName(p.Name, a.node()) == name && showsResized(&p, r) {
					return time.Since(start).Seconds()
				}
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return 0
}

func showsResized(p *corev1.Pod, r *Resize) bool {
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name != "main" || cs.Resources == nil {
			continue
		}
		return contains(cs.Resources.Requests, r.Requests) && contains(cs.Resources.Limits, r.Limits)
	}
	return false
}

// contains reports whether have holds each of want's quantities.
func contains(have, want corev1.ResourceList) bool {
	for res, q := range want {
		if h, ok := have[res]; !ok || h.Cmp(q) != 0 {
			return false
		}
	}
	return true
}

// stepsText lists a run's steps for the report.
func stepsText(recs []StepRecord) string {
	var b strings.Builder
	for _, s := range recs {
		switch {
		case s.Error != "":
			fmt.Fprintf(&b, "  - %.2fs %s %s (%s): failed: %s\n", s.T, s.Step, s.Pod, s.What, s.Error)
		case s.Done == 0:
			fmt.Fprintf(&b, "  - %.2fs %s %s (%s): not shown in the pod's status within 10 s\n", s.T, s.Step, s.Pod, s.What)
		default:
			fmt.Fprintf(&b, "  - %.2fs %s %s (%s): in the pod's status %.0f ms later\n", s.T, s.Step, s.Pod, s.What, (s.Done-s.T)*1000)
		}
	}
	return b.String()
}
