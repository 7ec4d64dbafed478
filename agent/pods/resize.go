package pods

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"nodeagent/agent/pleg"
	"nodeagent/agent/pods/allocation"
	"nodeagent/agent/pods/criconfig"
	"nodeagent/cgroups"
	"nodeagent/cri"
	"nodeagent/internal/qos"
)

// An in-place resize reaches the worker as its pod's allocated resources
// (w.pod, see resizeadmit.go). Each sync compares them with what the
// runtime reports for every running container and with the pod cgroup's
// files, and applies the difference as the kubelet's doPodResizeAction
// does: memory first, then CPU; the pod cgroup raised before its
// containers and lowered after them. The runtime and the cgroup files are
// the record of what was applied, so an agent killed midway finds the
// rest still to do.

// containerResize is a running container whose CRI resources differ from
// its allocation.
type containerResize struct {
	name       string
	id         string
	have, want *runtimeapi.LinuxContainerResources
}

func (r containerResize) memoryChanged() bool {
	return unlimitedAsZero(r.have.MemoryLimitInBytes) != unlimitedAsZero(r.want.MemoryLimitInBytes)
}

func (r containerResize) cpuChanged() bool {
	return r.have.CpuShares != r.want.CpuShares || unlimitedAsZero(r.have.CpuQuota) != unlimitedAsZero(r.want.CpuQuota) ||
		(r.want.CpuPeriod != 0 && r.have.CpuPeriod != r.want.CpuPeriod)
}

// unlimitedAsZero: runtimes report "no limit" as 0 or -1.
func unlimitedAsZero(v int64) int64 { return max(v, 0) }

// resizableContainer is the spec of a container an in-place resize
// changes: an app container or an init container (a sidecar, or a regular
// one while it runs: InPlacePodVerticalScalingInitContainers, 1.37).
func resizableContainer(pod *corev1.Pod, name string) *corev1.Container {
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == name {
			return &pod.Spec.Containers[i]
		}
	}
	for i := range pod.Spec.InitContainers {
		if c := &pod.Spec.InitContainers[i]; c.Name == name {
			return c
		}
	}
	return nil
}

// regularInit reports whether c is one of the pod's init containers that
// is not a sidecar: it is resized in place, never restarted for it.
func regularInit(pod *corev1.Pod, c *corev1.Container) bool {
	for i := range pod.Spec.InitContainers {
		if &pod.Spec.InitContainers[i] == c {
			return !qos.IsSidecar(c)
		}
	}
	return false
}

// containerResizes are the running containers whose resources differ
// from the allocation, in spec order.
func (w *worker) containerResizes(pod *corev1.Pod, rt *pleg.PodRuntime) []containerResize {
	var out []containerResize
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			c := resizableContainer(pod, cs[i].Name)
			if c == nil || c != &cs[i] {
				continue
			}
			recs := rt.ContainersNamed(c.Name)
			if len(recs) == 0 || recs[0].State != runtimeapi.ContainerState_CONTAINER_RUNNING {
				continue
			}
			have := recs[0].GetResources().GetLinux()
			if have == nil || w.needsResizeRestart(pod, c, recs[0]) {
				continue // the runtime does not say, or a restart applies it
			}
			r := containerResize{name: c.Name, id: recs[0].Id, have: have, want: w.m.configs.Resources(pod, c)}
			if r.memoryChanged() || r.cpuChanged() {
				out = append(out, r)
			}
		}
	}
	return out
}

// needsResizeRestart reports whether a running container was resized in a
// resource its resizePolicy restarts it for: its effective requests or
// limits differ from those it was created with (a resource that restarts
// is never changed in place, so creation's values are still its own).
func (w *worker) needsResizeRestart(pod *corev1.Pod, c *corev1.Container, rec *runtimeapi.ContainerStatus) bool {
	if !restartsOnResize(c) || regularInit(pod, c) {
		return false
	}
	created, ok := criconfig.ParseEffective(rec.GetAnnotations()[cri.AnnotationContainerResources])
	if !ok {
		return false // made by an agent before resize: nothing to compare with
	}
	now := criconfig.EffectiveResources(pod, c)
	for _, p := range c.ResizePolicy {
		if p.RestartPolicy != corev1.RestartContainer {
			continue
		}
		if (p.ResourceName == corev1.ResourceMemory && (now.MemoryRequest != created.MemoryRequest || now.MemoryLimit != created.MemoryLimit)) ||
			(p.ResourceName == corev1.ResourceCPU && (now.CPURequest != created.CPURequest || now.CPULimit != created.CPULimit)) {
			return true
		}
	}
	return false
}

func restartsOnResize(c *corev1.Container) bool {
	for _, p := range c.ResizePolicy {
		if p.RestartPolicy == corev1.RestartContainer {
			return true
		}
	}
	return false
}

// podResize is what the pod cgroup's files hold against its allocation.
type podResize struct {
	want      *cgroups.ResourceConfig
	have      cgroups.Values
	v2        bool
	memory    bool // the memory limit differs
	cpu       bool // shares (weight) or quota differ
	memGrows  bool
	cpuGrows  bool
	perPodCgs bool
	// current is what the runtime was last told of the pod cgroup: its
	// values as found, then each resource as it is written.
	current *cgroups.ResourceConfig
}

func (w *worker) podResize(pod *corev1.Pod) (podResize, error) {
	r := podResize{want: w.m.tree.PodValues(pod)}
	if _, ok := w.m.tree.PodCgroup(pod); !ok {
		return r, nil
	}
	have, err := w.m.tree.PodCurrent(pod)
	if err != nil {
		return r, fmt.Errorf("unable to get pod cgroup memory config for pod %q: %w", fullName(pod), err)
	}
	r.have, r.perPodCgs, r.v2 = have, true, have.CPUWeight != 0
	r.current = configOf(have, r.v2)
	// The kernel keeps memory limits in whole pages.
	if m := r.want.Memory; m != nil && *m > 0 && *m/pageSize*pageSize != have.MemoryLimit {
		r.memory = true
		r.memGrows = have.MemoryLimit >= 0 && *m > have.MemoryLimit
	}
	if s := r.want.CPUShares; s != nil {
		if r.v2 {
			r.cpu = cgroups.SharesToWeight(*s) != have.CPUWeight
			r.cpuGrows = cgroups.SharesToWeight(*s) > have.CPUWeight
		} else {
			r.cpu = *s != have.CPUShares
			r.cpuGrows = *s > have.CPUShares
		}
	}
	if q := r.want.CPUQuota; q != nil {
		want := *q
		if want <= 0 {
			want = -1
		}
		if want != have.CPUQuota {
			r.cpu = true
			r.cpuGrows = r.cpuGrows || want == -1 || (have.CPUQuota != -1 && want > have.CPUQuota)
		}
	}
	return r, nil
}

var pageSize = int64(os.Getpagesize())

// errResizeMemory is a memory decrease the pod's or a container's use
// does not allow yet; the sync tries again later.
var errResizeMemory = errors.New("cannot decrease memory limits")

// actuateResize applies the allocation to the running containers and the
// pod cgroup. It reports whether it changed anything; an error leaves
// the rest for the next sync and is shown as PodResizeInProgress/Error.
func (w *worker) actuateResize(ctx context.Context, pod *corev1.Pod, rt *pleg.PodRuntime, sandboxID string) (bool, error) {
	ctrs := w.containerResizes(pod, rt)
	pr, err := w.podResize(pod)
	if err != nil {
		return false, err
	}
	if len(ctrs) == 0 && !pr.memory && !pr.cpu {
		return false, nil
	}
	if err := w.checkMemoryDecrease(ctx, pod, sandboxID, pr, ctrs); err != nil {
		return false, err
	}
	w.actions++
	// Memory: the pod cgroup first when it grows, last when it shrinks.
	if pr.memory && pr.memGrows {
		if err := w.resizePod(ctx, pod, sandboxID, &pr, corev1.ResourceMemory); err != nil {
			return true, err
		}
	}
	for _, r := range ctrs {
		if r.memoryChanged() {
			step := cloneResources(r.want)
			step.CpuShares, step.CpuQuota, step.CpuPeriod = r.have.CpuShares, r.have.CpuQuota, r.have.CpuPeriod
			if err := w.m.rt.UpdateContainerResources(ctx, r.id, step); err != nil {
				return true, fmt.Errorf("update container %q memory: %w", r.name, err)
			}
		}
	}
	if pr.memory && !pr.memGrows {
		if err := w.resizePod(ctx, pod, sandboxID, &pr, corev1.ResourceMemory); err != nil {
			return true, err
		}
	}
	// CPU, in the same order.
	if pr.cpu && pr.cpuGrows {
		if err := w.resizePod(ctx, pod, sandboxID, &pr, corev1.ResourceCPU); err != nil {
			return true, err
		}
	}
	for _, r := range ctrs {
		if r.cpuChanged() {
			if err := w.m.rt.UpdateContainerResources(ctx, r.id, r.want); err != nil {
				return true, fmt.Errorf("update container %q cpu: %w", r.name, err)
			}
		}
	}
	if pr.cpu && !pr.cpuGrows {
		if err := w.resizePod(ctx, pod, sandboxID, &pr, corev1.ResourceCPU); err != nil {
			return true, err
		}
	}
	w.log.Info("pod resized in place", "containers", len(ctrs), "pod_memory", pr.memory, "pod_cpu", pr.cpu)
	return true, nil
}

// checkMemoryDecrease refuses a memory limit lowered to or below what the
// pod or the container uses now, in the kubelet's words.
func (w *worker) checkMemoryDecrease(ctx context.Context, pod *corev1.Pod, sandboxID string, pr podResize, ctrs []containerResize) error {
	var errs []error
	if pr.memory && !pr.memGrows && pr.have.Memory >= uint64(*pr.want.Memory) {
		errs = append(errs, fmt.Errorf("attempting to set pod memory limit (%d) below current usage (%d)", *pr.want.Memory, pr.have.Memory))
	}
	var usage map[string]uint64
	for _, r := range ctrs {
		want, have := r.want.MemoryLimitInBytes, unlimitedAsZero(r.have.MemoryLimitInBytes)
		if !r.memoryChanged() || want <= 0 || (have != 0 && want >= have) {
			continue
		}
		if usage == nil {
			var err error
			if usage, err = w.containerMemoryUsage(ctx, sandboxID); err != nil {
				return fmt.Errorf("unable to read memory usage for pod %q", fullName(pod))
			}
		}
		u, ok := usage[r.id]
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("missing container %q memory usage", r.name))
		case u >= uint64(want):
			errs = append(errs, fmt.Errorf("attempting to set container %q memory limit (%d) below current usage (%d)", r.name, want, u))
		}
	}
	switch len(errs) {
	case 0:
		return nil
	case 1:
		return fmt.Errorf("%w: %w", errResizeMemory, errs[0])
	}
	return fmt.Errorf("%w: %v", errResizeMemory, errs)
}

// containerMemoryUsage is each of the sandbox's containers' memory use,
// by container ID, as the runtime's stats say.
func (w *worker) containerMemoryUsage(ctx context.Context, sandboxID string) (map[string]uint64, error) {
	stats, err := w.m.rt.ListContainerStats(ctx, &runtimeapi.ContainerStatsFilter{PodSandboxId: sandboxID})
	if err != nil {
		return nil, err
	}
	out := map[string]uint64{}
	for _, s := range stats {
		if u := s.GetMemory().GetUsageBytes(); u != nil {
			out[s.GetAttributes().GetId()] = u.Value
		}
	}
	return out, nil
}

// notImplemented: a runtime without UpdatePodSandboxResources answers
// Unimplemented, or (containerd 2.2) Unknown "not implemented yet"; the
// kubelet goes on with both.
func notImplemented(err error) bool {
	var e *cri.Error
	return cri.IsUnimplemented(err) || (errors.As(err, &e) && e.Code == codes.Unknown && strings.Contains(e.Msg, "not implemented"))
}

func cloneResources(r *runtimeapi.LinuxContainerResources) *runtimeapi.LinuxContainerResources {
	return proto.Clone(r).(*runtimeapi.LinuxContainerResources)
}

// syncResize applies a resize admitted for the pod, and checks once after
// the worker starts that what runs matches the allocation (an agent
// killed mid-resize). It returns when to try again after a failure.
func (w *worker) syncResize(ctx context.Context, pod *corev1.Pod, rt *pleg.PodRuntime, sandboxID string) time.Duration {
	w.mu.Lock()
	r := w.resize
	w.mu.Unlock()
	if r.checked && r.inProgress == nil {
		return 0
	}
	if have, ok := w.m.allocated.Get(w.uid); ok && !have.Equal(allocation.Of(pod)) {
		return 0 // admitted for a spec this sync does not run yet: respec wakes it
	}
	// A failure of a resize admitted is its Error, retried; one found by
	// the start-up check with none admitted (drift) is said once: the pod
	// keeps what it runs with.
	failed := func(err error) time.Duration {
		if r.inProgress == nil {
			w.log.Warn("the pod's containers or cgroup differ from its allocation and could not be updated", "err", err)
			w.resizeChecked()
			return 0
		}
		w.resizeFailed(pod, err)
		return resizeRetry
	}
	changed, err := w.actuateResize(ctx, pod, rt, sandboxID)
	if err != nil {
		if ctx.Err() != nil {
			return 0
		}
		return failed(err)
	}
	if changed {
		if r.inProgress == nil {
			w.resizeAdmittedQuietly(pod) // found half done: shown until it is
		}
		if left := w.containerResizes(pod, w.inspect(ctx, rt)); len(left) > 0 {
			return failed(fmt.Errorf("container %q does not show its new resources after the update", left[0].name))
		}
	}
	if w.restartsForResize(pod, rt) {
		return 0 // done once the restarted containers run
	}
	w.resizeDone(pod)
	return 0
}

// restartsForResize reports whether a running container waits for the
// restart its resize policy asks.
func (w *worker) restartsForResize(pod *corev1.Pod, rt *pleg.PodRuntime) bool {
	for _, rec := range rt.GetContainers() {
		if rec.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
			continue
		}
		if c := resizableContainer(pod, rec.GetMetadata().GetName()); c != nil && w.needsResizeRestart(pod, c, rec) {
			return true
		}
	}
	return false
}

// resizeRetry is how soon a resize that failed (a memory decrease below
// use) is tried again; the kubelet retries at every sync.
const resizeRetry = 5 * time.Second
