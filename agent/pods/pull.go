package pods

// Image pulling: imagePullPolicy with the kubelet's reasons and events,
// the image pull back-off, pull secrets (pullsecrets.go), progress events
// for long pulls, and one pull at a time when serialized.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/distribution/reference"
	"google.golang.org/grpc/codes"
	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"nodeagent/cri"
)

// ensureImage honours imagePullPolicy, with the kubelet's reasons and the
// image pull back-off (10 s doubling to 300 s).
func (w *worker) ensureImage(ctx context.Context, pod *corev1.Pod, c *corev1.Container, sandboxCfg *runtimeapi.PodSandboxConfig) (string, time.Duration, bool) {
	if _, err := reference.ParseNormalizedNamed(c.Image); err != nil {
		msg := fmt.Sprintf("Failed to apply default image tag %q: couldn't parse image name %q: %v", c.Image, c.Image, err)
		w.waiting[c.Name] = waitingReason{Reason: "InvalidImageName", Message: msg}
		w.event(c.Name, corev1.EventTypeWarning, "InspectFailed", msg)
		return "", w.m.opts.ResyncPeriod, false
	}
	if c.ImagePullPolicy != corev1.PullAlways {
		img, err := w.m.rt.ImageStatus(ctx, c.Image)
		if err != nil {
			w.fail(c, "ErrImagePull", err)
			return "", w.m.opts.ResyncPeriod, false
		}
		if img != nil {
			w.event(c.Name, corev1.EventTypeNormal, "Pulled", fmt.Sprintf("Container image %q already present on machine", c.Image))
			return img.Id, 0, true
		}
		if c.ImagePullPolicy == corev1.PullNever {
			msg := fmt.Sprintf("Container image %q is not present with pull policy of Never", c.Image)
			w.waiting[c.Name] = waitingReason{Reason: "ErrImageNeverPull", Message: msg}
			w.event(c.Name, corev1.EventTypeWarning, "ErrImageNeverPull", msg)
			return "", w.m.opts.ResyncPeriod, false
		}
	}
	key := string(pod.UID) + "/" + c.Image
	if failed, ok := w.pullFailed[c.Image]; ok {
		if in, until := w.m.imagePulls.InBackOff(key, failed); in {
			msg := fmt.Sprintf("Back-off pulling image %q", c.Image)
			w.waiting[c.Name] = waitingReason{Reason: "ImagePullBackOff", Message: msg}
			w.event(c.Name, corev1.EventTypeNormal, "BackOff", msg)
			w.event(c.Name, corev1.EventTypeWarning, "Failed", "Error: ImagePullBackOff")
			return "", until.Sub(w.m.clock.Now()), false
		}
	}
	w.event(c.Name, corev1.EventTypeNormal, "Pulling", fmt.Sprintf("Pulling image %q", c.Image))
	pullStart := w.m.clock.Now()
	stopProgress := w.reportPullProgress(c, pullStart)
	ref, waited, err := w.m.pull(ctx, c.Image, w.pullCredentials(ctx, pod, c.Image), sandboxCfg)
	stopProgress()
	took := w.m.clock.Since(pullStart)
	w.pulling += took
	if err != nil {
		now := w.m.clock.Now()
		w.pullFailed[c.Image] = now
		w.m.imagePulls.Next(key, now)
		reason := "ErrImagePull"
		var crierr *cri.Error
		if errors.As(err, &crierr) && crierr.Code == codes.InvalidArgument {
			reason = "InvalidImageName"
		}
		w.event(c.Name, corev1.EventTypeWarning, "Failed", fmt.Sprintf("Failed to pull image %q: %v", c.Image, err))
		w.fail(c, reason, err)
		// Sync again soon: inside the back-off window the container then
		// shows ImagePullBackOff, and that sync waits for the window to end.
		return "", time.Second, false
	}
	// The kubelet's words, with the size the runtime reports.
	msg := fmt.Sprintf("Successfully pulled image %q in %s (%s including waiting).", c.Image, (took - waited).Round(time.Millisecond), took.Round(time.Millisecond))
	if img, err := w.m.rt.ImageStatus(ctx, ref); err == nil && img != nil {
		msg += fmt.Sprintf(" Image size: %d bytes.", img.GetSize())
	}
	w.event(c.Name, corev1.EventTypeNormal, "Pulled", msg)
	delete(w.pullFailed, c.Image)
	return ref, 0, true
}

// pullProgressPeriod is how often a pull still running is reported.
const pullProgressPeriod = 30 * time.Second

// reportPullProgress records an event every pullProgressPeriod while a
// pull runs: the CRI's pull is one call with no progress of its own, and a
// pod silent for minutes looks stuck. The returned func stops it.
func (w *worker) reportPullProgress(c *corev1.Container, start time.Time) func() {
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		t := w.m.clock.NewTicker(pullProgressPeriod)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C():
				w.event(c.Name, corev1.EventTypeNormal, "Pulling", fmt.Sprintf("Still pulling image %q: %s so far",
					c.Image, w.m.clock.Since(start).Round(time.Second)))
			}
		}
	}()
	return func() {
		close(done)
		<-stopped
	}
}

// pull pulls an image, one at a time when serializeImagePulls is set (the
// kubelet's default: parallel pulls compete for the same link and disk).
// With credentials, each is tried in turn until one works; without, the
// pull is anonymous.
// waited is the time spent waiting for the pull slot.
func (m *Manager) pull(ctx context.Context, image string, creds []*runtimeapi.AuthConfig, sandboxCfg *runtimeapi.PodSandboxConfig) (ref string, waited time.Duration, err error) {
	if m.pullSlot != nil {
		start := m.clock.Now()
		select {
		case m.pullSlot <- struct{}{}:
			defer func() { <-m.pullSlot }()
		case <-ctx.Done():
			return "", m.clock.Since(start), ctx.Err()
		}
		waited = m.clock.Since(start)
	}
	if len(creds) == 0 {
		ref, err = m.rt.PullImage(ctx, image, nil, sandboxCfg)
		return ref, waited, err
	}
	var errs []error
	for _, auth := range creds {
		ref, err := m.rt.PullImage(ctx, image, auth, sandboxCfg)
		if err == nil {
			return ref, waited, nil
		}
		errs = append(errs, err)
	}
	return "", waited, errors.Join(errs...)
}
