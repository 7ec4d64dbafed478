package cri

// Labels and annotations on everything the agent creates. The io.kubernetes
// keys are the kubelet's own, so tools that read kubelet-made containers
// (crictl, log shippers) understand ours; the nodeagent.io keys scope
// objects to one agent and carry what is needed to stop a pod after a
// restart without its spec.
const (
	LabelPodName       = "io.kubernetes.pod.name"
	LabelPodNamespace  = "io.kubernetes.pod.namespace"
	LabelPodUID        = "io.kubernetes.pod.uid"
	LabelContainerName = "io.kubernetes.container.name"

	// LabelManagedBy marks objects created by a nodeagent; its value is the
	// node name, so two agents on one runtime never touch each other's pods.
	LabelManagedBy = "nodeagent.io/node"

	AnnotationContainerHash            = "io.kubernetes.container.hash"
	AnnotationRestartCount             = "io.kubernetes.container.restartCount"
	AnnotationTerminationGrace         = "io.kubernetes.pod.terminationGracePeriod"
	AnnotationTerminationMessage       = "io.kubernetes.container.terminationMessagePath"
	AnnotationTerminationMessagePolicy = "io.kubernetes.container.terminationMessagePolicy"
	AnnotationTerminationMessageFile   = "nodeagent.io/termination-message-file"
	AnnotationPodQOSClass              = "nodeagent.io/qos-class"
	AnnotationContainerOOMScoreAdj     = "nodeagent.io/oom-score-adj"
	AnnotationPodCgroup                = "nodeagent.io/pod-cgroup"
	// AnnotationPodStartTime is the pod's status.startTime (RFC 3339),
	// so an agent restarted while the pod runs reports the same one.
	AnnotationPodStartTime          = "nodeagent.io/pod-start-time"
	AnnotationContainerImageRequest = "nodeagent.io/image"
	// AnnotationContainerResources are the cpu and memory requests and
	// limits (the pod's where the container has none) it was created
	// with: a resize of one its resizePolicy restarts for is told by them.
	AnnotationContainerResources = "nodeagent.io/resources"
	AnnotationPreStopHandler     = "io.kubernetes.container.preStopHandler"
	AnnotationContainerPorts     = "io.kubernetes.container.ports"
	// AnnotationImageVolumes lists the images (by ID, comma-separated)
	// the container mounts as image volumes: image GC keeps them.
	AnnotationImageVolumes = "nodeagent.io/image-volumes"
)
