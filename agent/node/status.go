package node

import (
	"errors"
	"fmt"
	"maps"
	"runtime"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"nodeagent/api"
)

// Status builds the node object served on /node from its inputs: the
// facts fixed at start (Facts), the runtime's readiness (SetRuntime) and
// the pressure conditions, read when the node is. It is the one owner of
// the node object. Safe for concurrent use.
type Status struct {
	pressure func(now time.Time) []corev1.NodeCondition
	extended func() (capacity, allocatable corev1.ResourceList)

	mu          sync.Mutex
	node        corev1.Node
	runtimeErr  string // why the runtime is not ready ("" when it is)
	networkErr  string
	readySince  metav1.Time
	lastReady   bool
	initialized bool
	// shuttingDown: graceful node shutdown is stopping the pods.
	shuttingDown bool
}

// Facts are what a node is at start.
type Facts struct {
	Name           string
	IP             string
	Version        string // the agent's, as kubeletVersion
	RuntimeVersion string // <runtime>://<version>
	Machine        Machine
	Capacity       corev1.ResourceList
	Allocatable    corev1.ResourceList
	// Annotations say what the Node API has no field for.
	Annotations map[string]string
	// Pressure gives the Memory/Disk/PIDPressure conditions (nil: none).
	Pressure func(now time.Time) []corev1.NodeCondition
	// Extended gives the device plugins' resources (nil: none).
	Extended func() (capacity, allocatable corev1.ResourceList)
	// StrictSupplementalGroups: the runtime takes supplementalGroupsPolicy
	// Strict (status.features, as the kubelet's NodeFeatures setter).
	StrictSupplementalGroups bool
	// RuntimeHandlers are the runtime's handlers and what each can do
	// (status.runtimeHandlers, as the kubelet's RuntimeHandlers setter).
	RuntimeHandlers []corev1.NodeRuntimeHandler
}

// NewStatus describes a node with the given facts.
func NewStatus(f Facts) *Status {
	s := &Status{pressure: f.Pressure, extended: f.Extended}
	capacity := f.Capacity.DeepCopy()
	delete(capacity, "pid")
	m := f.Machine
	var annotations map[string]string
	if len(f.Annotations) > 0 {
		annotations = maps.Clone(f.Annotations)
	}
	s.node = corev1.Node{
		TypeMeta: metav1.TypeMeta{Kind: "Node", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Name: f.Name, Annotations: annotations,
			Labels: map[string]string{"kubernetes.io/hostname": f.Name, "kubernetes.io/os": "linux", "kubernetes.io/arch": runtime.GOARCH}},
		Status: corev1.NodeStatus{
			DeclaredFeatures: DeclaredFeatures(),
			Features:         &corev1.NodeFeatures{SupplementalGroupsPolicy: &f.StrictSupplementalGroups},
			RuntimeHandlers:  f.RuntimeHandlers,
			Capacity:         capacity,
			Allocatable:      f.Allocatable,
			Addresses:        []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: f.IP}, {Type: corev1.NodeHostName, Address: f.Name}},
			NodeInfo: corev1.NodeSystemInfo{
				MachineID: m.MachineID, SystemUUID: m.SystemUUID, BootID: m.BootID, KernelVersion: m.KernelVersion, OSImage: m.OSImage,
				ContainerRuntimeVersion: f.RuntimeVersion, KubeletVersion: f.Version,
				OperatingSystem: "linux", Architecture: runtime.GOARCH,
			},
		},
	}
	if m.SwapBytes > 0 { // as the kubelet: no swap, no field
		s.node.Status.NodeInfo.Swap = &corev1.NodeSwapStatus{Capacity: &m.SwapBytes}
	}
	return s
}

// Annotation keys for what the Node API has no field for.
const (
	AnnotationCgroupVersion = api.AnnotationCgroupVersion
	AnnotationCgroupDriver  = api.AnnotationCgroupDriver
	AnnotationCgroupRoot    = api.AnnotationCgroupRoot
)

// SetRuntime records the runtime's readiness: runtimeErr and networkErr
// are empty when RuntimeReady and NetworkReady hold. It reports whether
// the node's readiness changed (the first call counts as a change).
func (s *Status) SetRuntime(runtimeErr, networkErr string, now time.Time) (ready, changed bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.runtimeErr, s.networkErr = runtimeErr, networkErr
	ready = runtimeErr == "" && networkErr == "" && !s.shuttingDown
	changed = !s.initialized || ready != s.lastReady
	if changed {
		s.readySince = metav1.NewTime(now)
	}
	s.initialized, s.lastReady = true, ready
	return ready, changed
}

// SetShuttingDown marks the node shutting down (NotReady, "node is
// shutting down") or not any more, and reports whether its readiness
// changed.
func (s *Status) SetShuttingDown(on bool, now time.Time) (ready, changed bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.shuttingDown = on
	ready = s.runtimeErr == "" && s.networkErr == "" && !on
	changed = s.initialized && ready != s.lastReady
	if changed {
		s.readySince = metav1.NewTime(now)
	}
	s.lastReady = ready
	return ready, changed
}

// NetworkError is why the runtime's pod network is not ready (nil when it
// is, and before the first check, when the runtime has not said otherwise).
func (s *Status) NetworkError() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.networkErr == "" {
		return nil
	}
	return errors.New("container runtime network not ready: " + s.networkErr)
}

// RuntimeError is why the runtime is down ("" when it answers).
func (s *Status) RuntimeError() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.runtimeErr
}

// Node returns the node object with its Ready condition, as the kubelet
// words it.
func (s *Status) Node(now time.Time) *corev1.Node {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.node.DeepCopy()
	cond := corev1.NodeCondition{
		Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", Message: "nodeagent is posting ready status",
		LastHeartbeatTime: metav1.NewTime(now), LastTransitionTime: s.readySince,
	}
	switch {
	case !s.initialized:
		cond.Status, cond.Reason, cond.Message = corev1.ConditionUnknown, "NodeStatusUnknown", "nodeagent has not checked the runtime yet"
	case s.shuttingDown:
		cond.Status, cond.Reason, cond.Message = corev1.ConditionFalse, "KubeletNotReady", "node is shutting down"
	case s.runtimeErr != "":
		cond.Status, cond.Reason, cond.Message = corev1.ConditionFalse, "KubeletNotReady", "container runtime is down: "+s.runtimeErr
	case s.networkErr != "":
		cond.Status, cond.Reason, cond.Message = corev1.ConditionFalse, "KubeletNotReady", fmt.Sprintf("container runtime network not ready: %s", s.networkErr)
	}
	n.Status.Conditions = nil
	if s.pressure != nil {
		n.Status.Conditions = s.pressure(now)
	}
	n.Status.Conditions = append(n.Status.Conditions, cond)
	if s.extended != nil {
		capacity, allocatable := s.extended()
		if n.Status.Capacity == nil {
			n.Status.Capacity = corev1.ResourceList{}
		}
		if n.Status.Allocatable == nil {
			n.Status.Allocatable = corev1.ResourceList{}
		}
		maps.Copy(n.Status.Capacity, capacity)
		maps.Copy(n.Status.Allocatable, allocatable)
	}
	return n
}
