package manifest

import (
	"strings"

	"github.com/distribution/reference"
	corev1 "k8s.io/api/core/v1"
)

// applyDefaults fills what the API server's defaulting would, for the fields
// the agent reads: policies, grace period, pull policy, termination message,
// port protocols, probe settings and requests that default to limits.
func applyDefaults(pod *corev1.Pod) {
	if pod.Namespace == "" {
		pod.Namespace = corev1.NamespaceDefault
	}
	s := &pod.Spec
	if s.RestartPolicy == "" {
		s.RestartPolicy = corev1.RestartPolicyAlways
	}
	if s.DNSPolicy == "" {
		s.DNSPolicy = corev1.DNSClusterFirst
	}
	if s.TerminationGracePeriodSeconds == nil {
		grace := int64(corev1.DefaultTerminationGracePeriodSeconds)
		s.TerminationGracePeriodSeconds = &grace
	}
	if s.SchedulerName == "" {
		s.SchedulerName = corev1.DefaultSchedulerName
	}
	if s.SecurityContext == nil {
		s.SecurityContext = &corev1.PodSecurityContext{}
	}
	if s.EnableServiceLinks == nil {
		yes := true
		s.EnableServiceLinks = &yes
	}
	for i := range s.Volumes {
		if img := s.Volumes[i].Image; img != nil && img.PullPolicy == "" {
			img.PullPolicy = defaultPullPolicy(img.Reference)
		}
	}
	for i := range s.InitContainers {
		defaultContainer(&s.InitContainers[i])
	}
	for i := range s.Containers {
		defaultContainer(&s.Containers[i])
	}
}

func defaultContainer(c *corev1.Container) {
	if c.ImagePullPolicy == "" {
		c.ImagePullPolicy = defaultPullPolicy(c.Image)
	}
	if c.TerminationMessagePath == "" {
		c.TerminationMessagePath = corev1.TerminationMessagePathDefault
	}
	if c.TerminationMessagePolicy == "" {
		c.TerminationMessagePolicy = corev1.TerminationMessageReadFile
	}
	for i := range c.Ports {
		if c.Ports[i].Protocol == "" {
			c.Ports[i].Protocol = corev1.ProtocolTCP
		}
	}
	// Requests default to limits, resource by resource.
	for name, lim := range c.Resources.Limits {
		if _, ok := c.Resources.Requests[name]; !ok {
			if c.Resources.Requests == nil {
				c.Resources.Requests = corev1.ResourceList{}
			}
			c.Resources.Requests[name] = lim.DeepCopy()
		}
	}
	for _, p := range []*corev1.Probe{c.LivenessProbe, c.ReadinessProbe, c.StartupProbe} {
		defaultProbe(p)
	}
}

func defaultProbe(p *corev1.Probe) {
	if p == nil {
		return
	}
	if p.TimeoutSeconds == 0 {
		p.TimeoutSeconds = 1
	}
	if p.PeriodSeconds == 0 {
		p.PeriodSeconds = 10
	}
	if p.SuccessThreshold == 0 {
		p.SuccessThreshold = 1
	}
	if p.FailureThreshold == 0 {
		p.FailureThreshold = 3
	}
	if p.HTTPGet != nil && p.HTTPGet.Scheme == "" {
		p.HTTPGet.Scheme = corev1.URISchemeHTTP
	}
}

// defaultPullPolicy is Always for ":latest" or untagged images, else
// IfNotPresent (digests included), as the API server defaults it.
func defaultPullPolicy(image string) corev1.PullPolicy {
	ref, err := reference.ParseNormalizedNamed(image)
	if err != nil {
		return corev1.PullIfNotPresent
	}
	if _, ok := ref.(reference.Digested); ok {
		return corev1.PullIfNotPresent
	}
	if tagged, ok := ref.(reference.Tagged); ok && !strings.EqualFold(tagged.Tag(), "latest") {
		return corev1.PullIfNotPresent
	}
	return corev1.PullAlways
}
