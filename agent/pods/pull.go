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

	"nodeagent/agent/images/pullrecords"
	"nodeagent/cri"
)

// pullTarget is what an image is pulled for: a container, or an image
// volume (container "": events go to the pod, as the kubelet's).
type pullTarget struct {
	image     string
	policy    corev1.PullPolicy
	container string
}

// pullFailure is why an image is not there: the waiting reason and
// message of the containers that need it, and whether it counts as a
// failed start (the kubelet's failed sync results).
type pullFailure struct {
	reason, message string
	failed          bool
}

// ensureImage honours imagePullPolicy for a container's image, its
// failure the container's waiting reason.
func (w *worker) ensureImage(ctx context.Context, pod *corev1.Pod, c *corev1.Container, sandboxCfg *runtimeapi.PodSandboxConfig) (string, time.Duration, bool) {
	ref, retry, why := w.ensure(ctx, pod, pullTarget{image: c.Image, policy: c.ImagePullPolicy, container: c.Name}, sandboxCfg)
	if why == nil {
		return ref, 0, true
	}
	if why.failed {
		w.fail(c, why.reason, errors.New(why.message))
	} else {
		w.waiting[c.Name] = waitingReason{Reason: why.reason, Message: why.message}
	}
	return "", retry, false
}

// ensure honours a pull policy, with the kubelet's reasons and events and
// the image pull back-off (10 s doubling to 300 s).
func (w *worker) ensure(ctx context.Context, pod *corev1.Pod, t pullTarget, sandboxCfg *runtimeapi.PodSandboxConfig) (string, time.Duration, *pullFailure) {
	if _, err := reference.ParseNormalizedNamed(t.image); err != nil {
		msg := fmt.Sprintf("Failed to apply default image tag %q: couldn't parse image name %q: %v", t.image, t.image, err)
		w.event(t.container, corev1.EventTypeWarning, "InspectFailed", msg)
		return "", w.m.opts.ResyncPeriod, &pullFailure{reason: "InvalidImageName", message: msg}
	}
	var creds []podCredential
	credsRead := false
	podCreds := func() []podCredential {
		if !credsRead {
			creds, credsRead = w.pullCredentials(ctx, pod, t.image), true
		}
		return creds
	}
	if t.policy != corev1.PullAlways {
		img, err := w.m.rt.ImageStatus(ctx, t.image)
		if err != nil {
			return "", w.m.opts.ResyncPeriod, &pullFailure{reason: "ErrImagePull", message: errorMessage(err), failed: true}
		}
		// An image on the node is the pod's only if it could have pulled
		// it (KEP-2535); if not, it pulls it with its own credentials.
		if img != nil && w.mayUse(t.image, img.Id, podCreds) {
			w.event(t.container, corev1.EventTypeNormal, "Pulled", fmt.Sprintf("Container image %q already present on machine and can be accessed by the pod", t.image))
			return img.Id, 0, nil
		}
		// Never says the same whether the image is absent or not the
		// pod's: its presence is not the pod's to learn.
		if t.policy == corev1.PullNever {
			msg := fmt.Sprintf("Container image %q is not present with pull policy of Never", t.image)
			w.event(t.container, corev1.EventTypeWarning, "ErrImageNeverPull", msg)
			return "", w.m.opts.ResyncPeriod, &pullFailure{reason: "ErrImageNeverPull", message: msg}
		}
	}
	key := string(pod.UID) + "/" + t.image
	if failed, ok := w.pullFailed[t.image]; ok {
		if in, until := w.m.imagePulls.InBackOff(key, failed); in {
			msg := fmt.Sprintf("Back-off pulling image %q", t.image)
			w.event(t.container, corev1.EventTypeNormal, "BackOff", msg)
			w.event(t.container, corev1.EventTypeWarning, "Failed", "Error: ImagePullBackOff")
			return "", until.Sub(w.m.clock.Now()), &pullFailure{reason: "ImagePullBackOff", message: msg}
		}
	}
	done := func(string, *pullrecords.Secret, error) {}
	if w.m.pullRecords != nil {
		var err error
		if done, err = w.m.pullRecords.Pulling(t.image); err != nil {
			return "", w.m.opts.ResyncPeriod, &pullFailure{reason: "ErrImagePull", message: err.Error(), failed: true}
		}
	}
	w.event(t.container, corev1.EventTypeNormal, "Pulling", fmt.Sprintf("Pulling image %q", t.image))
	pullStart := w.m.clock.Now()
	stopProgress := w.reportPullProgress(t, pullStart)
	ref, used, waited, err := w.m.pull(ctx, t.image, podCreds(), sandboxCfg)
	done(ref, used, err)
	stopProgress()
	took := w.m.clock.Since(pullStart)
	w.pulling += took
	if err != nil {
		now := w.m.clock.Now()
		w.pullFailed[t.image] = now
		w.m.imagePulls.Next(key, now)
		reason := "ErrImagePull"
		var crierr *cri.Error
		if errors.As(err, &crierr) && crierr.Code == codes.InvalidArgument {
			reason = "InvalidImageName"
		}
		w.event(t.container, corev1.EventTypeWarning, "Failed", fmt.Sprintf("Failed to pull image %q: %v", t.image, err))
		// Sync again soon: inside the back-off window the container then
		// shows ImagePullBackOff, and that sync waits for the window to end.
		return "", time.Second, &pullFailure{reason: reason, message: errorMessage(err), failed: true}
	}
	// The kubelet's words, with the size the runtime reports.
	msg := fmt.Sprintf("Successfully pulled image %q in %s (%s including waiting).", t.image, (took - waited).Round(time.Millisecond), took.Round(time.Millisecond))
	if img, err := w.m.rt.ImageStatus(ctx, ref); err == nil && img != nil {
		msg += fmt.Sprintf(" Image size: %d bytes.", img.GetSize())
	}
	w.event(t.container, corev1.EventTypeNormal, "Pulled", msg)
	delete(w.pullFailed, t.image)
	return ref, 0, nil
}

// errorMessage is what the runtime said, without the gRPC wrapping.
func errorMessage(err error) string {
	var crierr *cri.Error
	if errors.As(err, &crierr) {
		return crierr.Msg
	}
	return err.Error()
}

// pullProgressPeriod is how often a pull still running is reported.
const pullProgressPeriod = 30 * time.Second

// reportPullProgress records an event every pullProgressPeriod while a
// pull runs: the CRI's pull is one call with no progress of its own, and a
// pod silent for minutes looks stuck. The returned func stops it.
func (w *worker) reportPullProgress(t pullTarget, start time.Time) func() {
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		tick := w.m.clock.NewTicker(pullProgressPeriod)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C():
				w.event(t.container, corev1.EventTypeNormal, "Pulling", fmt.Sprintf("Still pulling image %q: %s so far",
					t.image, w.m.clock.Since(start).Round(time.Second)))
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
// used is the secret whose credential worked (nil: anonymous).
func (m *Manager) pull(ctx context.Context, image string, creds []podCredential, sandboxCfg *runtimeapi.PodSandboxConfig) (ref string, used *pullrecords.Secret, waited time.Duration, err error) {
	if m.pullSlot != nil {
		start := m.clock.Now()
		select {
		case m.pullSlot <- struct{}{}:
			defer func() { <-m.pullSlot }()
		case <-ctx.Done():
			return "", nil, m.clock.Since(start), ctx.Err()
		}
		waited = m.clock.Since(start)
	}
	if len(creds) == 0 {
		ref, err = m.rt.PullImage(ctx, image, nil, sandboxCfg)
		return ref, nil, waited, err
	}
	var errs []error
	for _, c := range creds {
		ref, err := m.rt.PullImage(ctx, image, c.auth, sandboxCfg)
		if err == nil {
			return ref, &c.secret, waited, nil
		}
		errs = append(errs, err)
	}
	return "", nil, waited, errors.Join(errs...)
}

// mayUse reports whether the pod may use imageRef, on the node, as image
// (pullrecords.Store.MayUse); an unreadable record makes it pull.
func (w *worker) mayUse(image, imageRef string, podCreds func() []podCredential) bool {
	if w.m.pullRecords == nil {
		return true
	}
	var secrets []pullrecords.Secret
	for _, c := range podCreds() {
		secrets = append(secrets, c.secret)
	}
	ok, err := w.m.pullRecords.MayUse(image, imageRef, secrets)
	if err != nil {
		w.log.Warn("image pull record unreadable; pulling with the pod's credentials", "image", image, "err", err)
	}
	return ok && err == nil
}
