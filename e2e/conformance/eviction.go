package conformance

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"nodeagent/e2e/experiment"
)

// The eviction cases need the agent's eviction settings to be tight
// enough to reach without pressing the whole host: like the kubelet's
// eviction e2e tests, which rewrite the kubelet's config, they start the
// agent binary beside the live one (same runtime, their own cgroup root
// and port) with pods' memory and thresholds computed from the node's
// current free memory, and run their pods there.

// evictionSettings sizes the pods' memory from what is free now: 1 GiB,
// or half the free memory on a small node; the hard threshold is a quarter
// of it.
func evictionSettings() (podsMemory, threshold int64, total int64, err error) {
	total, free, err := experiment.NodeMemory()
	if err != nil {
		return 0, 0, 0, err
	}
	// 512 MiB: a hog crosses a quarter below it after about 400 MiB, in
	// time also on a host that faults memory in at 20-35 MB/s (seen on a
	// slow day, with other tests running: 1 GiB did not cross in 20 s).
	podsMemory = min(int64(512<<20), free/2)
	if podsMemory < 256<<20 {
		return 0, 0, 0, fmt.Errorf("only %d MiB free: too little for an eviction case", free>>20)
	}
	return podsMemory, podsMemory / 4, total, nil
}

// runScenario runs one repetition of pods on an agent of its own.
func runScenario(t *T, name string, duration time.Duration, pods []experiment.Pod) (*experiment.Run, error) {
	n := t.Node()
	if n.AgentBin == "" {
		return nil, errors.New("no agent binary to start with eviction settings (nodetest conformance --agent-bin)")
	}
	podsMemory, threshold, total, err := evictionSettings()
	if err != nil {
		return nil, err
	}
	pm := resource.NewQuantity(podsMemory, resource.BinarySI)
	s := &experiment.Scenario{
		Name: name, Duration: metav1.Duration{Duration: duration}, Repetitions: 1, SampleHz: 50, Pods: pods,
		Agent: experiment.AgentSettings{PodsMemory: pm, EvictionRanking: "kubelet",
			EvictionHard: map[string]string{"allocatableMemory.available": resource.NewQuantity(threshold, resource.BinarySI).String()}},
	}
	s.Default()
	if err := s.Validate(total); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "nodeagent-conformance-"+name+"-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	runs, err := experiment.Execute(t.Context(), s, experiment.Env{AgentBin: n.AgentBin, RuntimeEndpoint: n.RuntimeEndpoint, Image: n.Image}, dir, total, nil)
	if len(runs) == 0 {
		return nil, err
	}
	return &runs[0], err
}

func fates(r *experiment.Run) map[string]string {
	out := map[string]string{}
	for _, p := range r.Pods {
		out[p.Name] = p.Fate
	}
	return out
}

func priority(p int32) *int32 { return &p }

var innocent = experiment.Pod{Name: "innocent", Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
	Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
	Memhog: &experiment.Memhog{Size: resource.MustParse("32Mi"), Pattern: "hold"}}

func memoryAllocatableEviction(t *T) error {
	hog := experiment.Pod{Name: "memhog", Memhog: &experiment.Memhog{Size: resource.MustParse("4Gi"), Rate: resource.MustParse("150Mi"), Pattern: "grow", StartDelay: metav1.Duration{Duration: 2 * time.Second}}}
	r, err := runScenario(t, "memory-allocatable", 30*time.Second, []experiment.Pod{innocent, hog})
	if err != nil {
		return err
	}
	f := fates(r)
	if f["memhog"] != "evicted" || f["innocent"] != "survived" {
		return fmt.Errorf("fates %v, want the BestEffort memhog evicted and the innocent pod alive", f)
	}
	return noKernelKills(r)
}

func priorityMemoryEvictionOrdering(t *T) error {
	grow := func(name string, prio int32) experiment.Pod {
		return experiment.Pod{Name: name, Priority: priority(prio),
			Memhog: &experiment.Memhog{Size: resource.MustParse("4Gi"), Rate: resource.MustParse("60Mi"), Pattern: "grow", StartDelay: metav1.Duration{Duration: 2 * time.Second}}}
	}
	r, err := runScenario(t, "priority-ordering", 30*time.Second, []experiment.Pod{innocent, grow("low", 0), grow("high", 1000)})
	if err != nil {
		return err
	}
	var order []string
	for _, e := range r.Events {
		order = append(order, e.Pod+" by "+e.By)
	}
	if len(order) == 0 || order[0] != "low by agent" {
		return fmt.Errorf("kills in order %v, want the low-priority hog evicted first", order)
	}
	if f := fates(r); f["innocent"] != "survived" {
		return fmt.Errorf("fates %v: the Guaranteed pod was killed (%s)", f, strings.Join(order, ", "))
	}
	return noKernelKills(r)
}

func noKernelKills(r *experiment.Run) error {
	for _, s := range r.Samples {
		if s.KernelOOMKills > 0 {
			return fmt.Errorf("the kernel OOM killer acted (%d kills) before the agent relieved the pressure", s.KernelOOMKills)
		}
	}
	return nil
}
