package node

import "slices"

// implementedFeatures are the node features (the NodeDeclaredFeatures
// framework's names, GA in 1.37) the agent implements: the scheduler
// places pods that need one only on nodes that declare it, and the API
// server refuses pod updates that need one the node lacks. A feature is
// declared only when the agent does what pods then rely on.
var implementedFeatures = []string{
	"RestartAllContainersOnContainerExits",    // agent/pods/restartall.go
	"InPlacePodLevelResourcesVerticalScaling", // agent/pods/resize.go, with pod-level resources
	"InPlacePodVerticalScalingInitContainers", // agent/pods/resize.go: regular init containers too
}

// missingFeatures are the framework's features the agent does not
// implement yet, each with what it would take; pods that need them are
// refused at admission (PodFeatureUnsupported), as the kubelet refuses
// them on a node without the feature.
var missingFeatures = map[string]string{
	"DRANodeAllocatableResources":                  "dynamic resource allocation",
	"DRAOptionalNodeOperations":                    "dynamic resource allocation",
	"ExtendWebSocketsToKubelet":                    "websocket streaming (exec, attach, port-forward) on the kubelet server",
	"InPlacePodVerticalScalingMemoryBackedVolumes": "in-place resize of memory-backed emptyDirs",
	"UserNamespacesHostNetworkSupport":             "user namespaces with the host network",
	"VolumeBindMountOptions":                       "bind mount options on volume mounts",
}

// DeclaredFeatures is the node's status.declaredFeatures, sorted as the
// API server requires.
func DeclaredFeatures() []string {
	return slices.Sorted(slices.Values(implementedFeatures))
}
