// Package experiment runs declarative OOM stress experiments against the
// agent: a scenario names the agent's settings and a set of memory-hungry
// pods; the runner starts an agent with those settings, applies the pods,
// samples the node and every pod cgroup at 100 Hz, records the agent's
// evictions and the kernel's OOM kills, cleans up, repeats, and writes a
// timeline, a summary, a report and a plot.
package experiment

import (
	"errors"
	"fmt"
	"os"
	"reflect"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"nodeagent/internal/qos"
)

// Scenario is one experiment, as its file declares it.
type Scenario struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Agent       AgentSettings   `json:"agent"`
	Duration    metav1.Duration `json:"duration"`
	Repetitions int             `json:"repetitions,omitempty"` // default 1
	SampleHz    int             `json:"sampleHz,omitempty"`    // default 100
	Pods        []Pod           `json:"pods"`
	// HostLoad runs on the host, outside kubepods, for every run.
	HostLoad *Background `json:"hostLoad,omitempty"`
	// Steps are done to the pods while a run goes on (resize).
	Steps []Step `json:"steps,omitempty"`
	// Expect is the outcome the scenario is written for; the report
	// judges each run against it, beside the fixed checks.
	Expect Expect `json:"expect,omitempty"`
}

// Expect declares a scenario's outcome.
type Expect struct {
	// Evicted are the pod groups the agent must evict first, in this
	// order (of each group's first eviction). Later evictions are not
	// judged, unless their group is in Survive.
	Evicted []string `json:"evicted,omitempty"`
	// Survive are the pod groups none of whose pods may be evicted or
	// OOM-killed.
	Survive []string `json:"survive,omitempty"`
	// KernelOOMKills is none (the default: a kernel OOM kill fails the
	// run), allowed (counted, not judged) or expected (at least one a run,
	// for experiments on the kernel's own behaviour).
	KernelOOMKills string `json:"kernelOOMKills,omitempty"`
}

// AgentSettings are the agent's settings for the experiment.
type AgentSettings struct {
	// PodsMemory is the memory left to pods: kubeReserved takes the rest
	// of the node's, as the kubelet's MemoryAllocatableEviction test does.
	// Unset: nothing reserved.
	PodsMemory *resource.Quantity `json:"podsMemory,omitempty"`
	// EvictionHard, EvictionSoft and EvictionSoftGracePeriod are the
	// KubeletConfiguration fields; unset means the kubelet's defaults.
	EvictionHard            map[string]string `json:"evictionHard,omitempty"`
	EvictionSoft            map[string]string `json:"evictionSoft,omitempty"`
	EvictionSoftGracePeriod map[string]string `json:"evictionSoftGracePeriod,omitempty"`
	// EvictionRanking is kubelet (default) or qos.
	EvictionRanking string `json:"evictionRanking,omitempty"`
}

// Pod is a group of identical pods.
type Pod struct {
	Name     string              `json:"name"`
	Count    int                 `json:"count,omitempty"` // default 1
	QOS      corev1.PodQOSClass  `json:"qos,omitempty"`   // checked against requests and limits when set
	Priority *int32              `json:"priority,omitempty"`
	Requests corev1.ResourceList `json:"requests,omitempty"`
	Limits   corev1.ResourceList `json:"limits,omitempty"`
	// Exactly one workload, or none (an idle pod).
	Memhog    *Memhog     `json:"memhog,omitempty"`
	PageCache *PageCache  `json:"pageCache,omitempty"`
	Load      *Background `json:"load,omitempty"`
}

// Memhog allocates anonymous memory (cmd/memhog).
type Memhog struct {
	Size       resource.Quantity `json:"size"`              // reached before holding or growing on
	Rate       resource.Quantity `json:"rate,omitempty"`    // bytes per second; 0: as fast as it can
	Pattern    string            `json:"pattern,omitempty"` // hold (default), grow or leak
	StartDelay metav1.Duration   `json:"startDelay,omitempty"`
}

// PageCache writes a file into an emptyDir and reads it over and over: page
// cache the pod is charged for, which the working set leaves out.
type PageCache struct {
	Size       resource.Quantity `json:"size"`
	StartDelay metav1.Duration   `json:"startDelay,omitempty"`
}

// Load reads and checks a scenario against a node with nodeMemory bytes.
// Unknown fields, impossible sizes and conflicting settings are refused,
// each with its field path.
func Load(file string, nodeMemory int64) (*Scenario, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var s Scenario
	if unknown := unknownFields(data, reflect.TypeFor[Scenario]()); len(unknown) > 0 {
		var errs []error
		for _, path := range unknown {
			errs = append(errs, fmt.Errorf("unknown field %q", path))
		}
		return nil, fmt.Errorf("scenario %s: %w", file, errors.Join(errs...))
	}
	if err := yaml.UnmarshalStrict(data, &s); err != nil {
		return nil, fmt.Errorf("scenario %s: %w", file, err)
	}
	s.Default()
	if err := s.Validate(nodeMemory); err != nil {
		return nil, fmt.Errorf("scenario %s: %w", file, err)
	}
	return &s, nil
}

// Default fills in what a scenario may leave out.
func (s *Scenario) Default() {
	if s.Repetitions == 0 {
		s.Repetitions = 1
	}
	if s.SampleHz == 0 {
		s.SampleHz = 100
	}
	if s.Agent.EvictionRanking == "" {
		s.Agent.EvictionRanking = "kubelet"
	}
	if s.Expect.KernelOOMKills == "" {
		s.Expect.KernelOOMKills = "none"
	}
	for i := range s.Pods {
		if s.Pods[i].Count == 0 {
			s.Pods[i].Count = 1
		}
		if m := s.Pods[i].Memhog; m != nil && m.Pattern == "" {
			m.Pattern = "hold"
		}
	}
}

// Validate checks the scenario; errors name the field.
func (s *Scenario) Validate(nodeMemory int64) error {
	var errs []error
	bad := func(path, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", path, fmt.Sprintf(format, args...)))
	}
	if s.Name == "" || strings.ContainsAny(s.Name, "/ \t") {
		bad("name", "%q: want a non-empty name without spaces or slashes", s.Name)
	}
	if s.Duration.Duration <= 0 {
		bad("duration", "%q: must be positive", s.Duration.Duration)
	}
	if s.Repetitions < 1 {
		bad("repetitions", "%d: must be at least 1", s.Repetitions)
	}
	if s.SampleHz < 1 || s.SampleHz > 1000 {
		bad("sampleHz", "%d: want 1..1000", s.SampleHz)
	}
	if r := s.Agent.EvictionRanking; r != "kubelet" && r != "qos" {
		bad("agent.evictionRanking", "%q: want kubelet or qos", r)
	}
	podsMemory := nodeMemory
	if pm := s.Agent.PodsMemory; pm != nil {
		switch {
		case pm.Value() <= 0:
			bad("agent.podsMemory", "%s: must be positive", pm)
		case pm.Value() > nodeMemory:
			bad("agent.podsMemory", "%s: more than the node's %s", pm, quantity(nodeMemory))
		default:
			podsMemory = pm.Value()
		}
	}
	if len(s.Pods) == 0 {
		bad("pods", "at least one pod is needed")
	}
	names := map[string]bool{}
	var requested int64
	for i, p := range s.Pods {
		path := fmt.Sprintf("pods[%d]", i)
		if p.Name == "" || strings.ToLower(p.Name) != p.Name || strings.ContainsAny(p.Name, "/ _.") {
			bad(path+".name", "%q: want a lower-case DNS label", p.Name)
		}
		if names[p.Name] {
			bad(path+".name", "%q: used twice", p.Name)
		}
		names[p.Name] = true
		if p.Count < 1 || p.Count > 100 {
			bad(path+".count", "%d: want 1..100", p.Count)
		}
		for res, q := range p.Requests {
			if res != corev1.ResourceCPU && res != corev1.ResourceMemory {
				bad(path+".requests."+string(res), "only cpu and memory are supported")
			}
			if l, ok := p.Limits[res]; ok && q.Cmp(l) > 0 {
				bad(path+".requests."+string(res), "%s is more than the limit %s", q.String(), l.String())
			}
		}
		for res := range p.Limits {
			if res != corev1.ResourceCPU && res != corev1.ResourceMemory {
				bad(path+".limits."+string(res), "only cpu and memory are supported")
			}
		}
		if mem, ok := p.Limits[corev1.ResourceMemory]; ok && mem.Value() > nodeMemory {
			bad(path+".limits.memory", "%s: more than the node's %s", mem.String(), quantity(nodeMemory))
		}
		req := p.Requests[corev1.ResourceMemory]
		if _, ok := p.Requests[corev1.ResourceMemory]; !ok {
			req = p.Limits[corev1.ResourceMemory]
		}
		requested += req.Value() * int64(p.Count)
		if p.QOS != "" {
			if got := qos.Class(p.pod("x", "image")); got != p.QOS {
				bad(path+".qos", "%s, but its requests and limits make it %s", p.QOS, got)
			}
		}
		var workloads []string
		for name, set := range map[string]bool{"memhog": p.Memhog != nil, "pageCache": p.PageCache != nil, "load": p.Load != nil} {
			if set {
				workloads = append(workloads, name)
			}
		}
		if len(workloads) > 1 {
			sort.Strings(workloads)
			bad(path, "%s set: a pod has one workload", strings.Join(workloads, " and "))
		}
		if p.Load != nil {
			p.Load.validate(path+".load", false, nodeMemory, bad)
		}
		if m := p.Memhog; m != nil {
			if m.Size.Value() <= 0 && m.Pattern != "leak" {
				bad(path+".memhog.size", "%s: must be positive", m.Size.String())
			}
			if m.Size.Value() > nodeMemory {
				bad(path+".memhog.size", "%s: more than the node's %s", m.Size.String(), quantity(nodeMemory))
			}
			if m.Rate.Value() < 0 {
				bad(path+".memhog.rate", "%s: must not be negative", m.Rate.String())
			}
			if m.Pattern != "hold" && m.Pattern != "grow" && m.Pattern != "leak" {
				bad(path+".memhog.pattern", "%q: want hold, grow or leak", m.Pattern)
			}
			if m.StartDelay.Duration < 0 || m.StartDelay.Duration >= s.Duration.Duration && s.Duration.Duration > 0 {
				bad(path+".memhog.startDelay", "%s: must be within the duration %s", m.StartDelay.Duration, s.Duration.Duration)
			}
		}
		if c := p.PageCache; c != nil {
			if c.Size.Value() <= 0 || c.Size.Value() > nodeMemory {
				bad(path+".pageCache.size", "%s: want more than 0 and at most the node's %s", c.Size.String(), quantity(nodeMemory))
			}
		}
	}
	inExpect := map[string]string{}
	for _, list := range []struct {
		field string
		names []string
	}{{"expect.evicted", s.Expect.Evicted}, {"expect.survive", s.Expect.Survive}} {
		for i, name := range list.names {
			path := fmt.Sprintf("%s[%d]", list.field, i)
			switch {
			case !names[name]:
				bad(path, "%q: no pod group of that name", name)
			case inExpect[name] != "":
				bad(path, "%q: already in %s", name, inExpect[name])
			default:
				inExpect[name] = list.field
			}
		}
	}
	if s.HostLoad != nil {
		s.HostLoad.validate("hostLoad", true, nodeMemory, bad)
	}
	if k := s.Expect.KernelOOMKills; k != "none" && k != "allowed" && k != "expected" {
		bad("expect.kernelOOMKills", "%q: want none, allowed or expected", k)
	}
	s.validateSteps(nodeMemory, bad)
	if requested > podsMemory {
		bad("pods", "memory requests add up to %s, more than the %s left to pods: the agent would reject some", quantity(requested), quantity(podsMemory))
	}
	return errors.Join(errs...)
}

// PodCount is the number of pods a run starts.
func (s *Scenario) PodCount() int {
	n := 0
	for _, p := range s.Pods {
		n += p.Count
	}
	return n
}

// pod is one instance of p as a manifest: restartPolicy Never, so a killed
// pod stays dead and the order of kills is plain.
func (p Pod) pod(name, image string) *corev1.Pod {
	grace := int64(1)
	pod := &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{"experiment-pod": p.Name}},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever, TerminationGracePeriodSeconds: &grace, Priority: p.Priority,
			Containers: []corev1.Container{{Name: "main", Image: image, Command: p.command(),
				Resources: corev1.ResourceRequirements{Requests: p.Requests, Limits: p.Limits}}},
		},
	}
	if p.PageCache != nil || p.Load != nil {
		pod.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
		pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
	}
	return pod
}

func (p Pod) command() []string {
	switch {
	case p.Memhog != nil:
		m := p.Memhog
		return []string{"memhog", "--mb", fmt.Sprint(max(m.Size.Value()>>20, 1)), "--rate", fmt.Sprint(float64(m.Rate.Value()) / (1 << 20)),
			"--pattern", m.Pattern, "--start-delay", m.StartDelay.Duration.String(), "--report", "1h"}
	case p.Load != nil:
		return []string{"sh", "-c", p.Load.script("/data")}
	case p.PageCache != nil:
		c := p.PageCache
		return []string{"sh", "-c", fmt.Sprintf("sleep %.3f; dd if=/dev/zero of=/data/f bs=1M count=%d 2>/dev/null; while true; do cat /data/f >/dev/null; done",
			c.StartDelay.Duration.Seconds(), max(c.Size.Value()>>20, 1))}
	}
	return []string{"sh", "-c", "while true; do sleep 1 & wait $!; done"}
}

func quantity(b int64) string { return resource.NewQuantity(b, resource.BinarySI).String() }

// Settings is the agent's config for the scenario, as KubeletConfiguration
// YAML lines.
func (s *Scenario) Settings(nodeMemory int64) string {
	var b strings.Builder
	if pm := s.Agent.PodsMemory; pm != nil {
		fmt.Fprintf(&b, "kubeReserved: {memory: \"%d\"}\n", nodeMemory-pm.Value())
	}
	for _, f := range []struct {
		field string
		m     map[string]string
	}{{"evictionHard", s.Agent.EvictionHard}, {"evictionSoft", s.Agent.EvictionSoft}, {"evictionSoftGracePeriod", s.Agent.EvictionSoftGracePeriod}} {
		if len(f.m) > 0 {
			data, _ := yaml.Marshal(map[string]any{f.field: f.m})
			b.Write(data)
		}
	}
	b.WriteString("evictionPressureTransitionPeriod: 5s\n")
	return b.String()
}

// Elapsed is a time relative to a run's start, in seconds.
func Elapsed(start, t time.Time) float64 { return t.Sub(start).Seconds() }
