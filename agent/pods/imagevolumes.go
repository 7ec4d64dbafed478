package pods

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// volumePull is an image volume whose image is not there this sync.
type volumePull struct {
	why   *pullFailure
	retry time.Duration
}

// imageVolumesFor makes sure the image volumes container c mounts are
// pulled, as the kubelet: the pod's image volumes are pulled once a sync,
// before its first container starts, each with the volume's pull policy
// and the pod's pull secrets, events on the pod. A container mounting one
// that failed waits with the pull's reason; the others start.
func (w *worker) imageVolumesFor(ctx context.Context, pod *corev1.Pod, c *corev1.Container, sandboxCfg *runtimeapi.PodSandboxConfig) (time.Duration, bool) {
	if !hasImageVolumes(pod) {
		return 0, true
	}
	if w.volumePulls == nil {
		w.pullImageVolumes(ctx, pod, sandboxCfg)
	}
	var why *pullFailure
	var retry time.Duration
	for _, vm := range c.VolumeMounts {
		if p, ok := w.volumePulls[vm.Name]; ok {
			w.event(c.Name, corev1.EventTypeWarning, "Failed", "Error: "+p.why.message)
			why, retry = p.why, p.retry
		}
	}
	if why == nil {
		return 0, true
	}
	w.waiting[c.Name] = waitingReason{Reason: why.reason, Message: why.message}
	w.failures++
	return retry, false
}

// pullImageVolumes pulls every image volume of the pod and hands the
// images to the plan for the runtime to mount.
func (w *worker) pullImageVolumes(ctx context.Context, pod *corev1.Pod, sandboxCfg *runtimeapi.PodSandboxConfig) {
	w.volumePulls = map[string]volumePull{}
	handler, err := w.runtimeHandler(ctx, pod)
	specs := map[string]*runtimeapi.ImageSpec{}
	for _, v := range pod.Spec.Volumes {
		if v.Image == nil {
			continue
		}
		if err != nil {
			w.volumePulls[v.Name] = volumePull{why: &pullFailure{reason: "ErrImagePull", message: err.Error(), failed: true}, retry: w.m.opts.ResyncPeriod}
			continue
		}
		ref, retry, why := w.ensure(ctx, pod, pullTarget{image: v.Image.Reference, policy: v.Image.PullPolicy}, sandboxCfg)
		if why != nil {
			w.volumePulls[v.Name] = volumePull{why: why, retry: retry}
			continue
		}
		specs[v.Name] = &runtimeapi.ImageSpec{Image: ref, UserSpecifiedImage: v.Image.Reference, RuntimeHandler: handler, Annotations: pod.Annotations}
	}
	w.plan.ImageVolumes = specs
}

func hasImageVolumes(pod *corev1.Pod) bool {
	for i := range pod.Spec.Volumes {
		if pod.Spec.Volumes[i].Image != nil {
			return true
		}
	}
	return false
}
