// Package api is nodeagent's local API: the wire types the agent serves
// beside the Kubernetes ones (probe reports, eviction traces, the cgroup
// tree, node annotations) and the one client nodectl, nodetest, the
// benchmarks and the integration tests use. Of nodeagent it imports only
// internal/control (the control socket's client), so any package may
// depend on it.
package api

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Node annotations for what the Node API has no field for.
const (
	AnnotationCgroupVersion = "nodeagent.io/cgroup-version" // v1 or v2
	AnnotationCgroupDriver  = "nodeagent.io/cgroup-driver"  // cgroupfs or systemd
	AnnotationCgroupRoot    = "nodeagent.io/kubepods"       // the kubepods cgroup's directory
)

// Redacted stands for a value the read-only API does not serve.
const Redacted = "(redacted)"

// AnnotationManifest is the file a static pod came from.
const AnnotationManifest = "nodeagent.io/manifest"

// ProbeKind is a probe's type.
type ProbeKind string

const (
	Liveness  ProbeKind = "Liveness"
	Readiness ProbeKind = "Readiness"
	Startup   ProbeKind = "Startup"
)

// ProbeRun is one run of a probe.
type ProbeRun struct {
	Time     time.Time `json:"time"`
	Result   string    `json:"result"`
	Message  string    `json:"message,omitempty"`
	Duration float64   `json:"durationSeconds"`
}

// ProbeReport is a probe's state (GET /pods/{ns}/{name}/probes).
type ProbeReport struct {
	Container   string    `json:"container"`
	Type        ProbeKind `json:"type"`
	ContainerID string    `json:"containerID,omitempty"`
	Result      string    `json:"result"`
	Consecutive int       `json:"consecutive"` // runs in a row with the last run's result
	OnHold      bool      `json:"onHold,omitempty"`
	Missed      int       `json:"missedPeriods,omitempty"`
	Last        *ProbeRun `json:"lastRun,omitempty"`
}

// EvictionTrace is the record of one eviction decision (GET /evictions).
type EvictionTrace struct {
	ID             int              `json:"id"`
	Signal         string           `json:"signal"`
	Threshold      string           `json:"threshold"`
	ThresholdBytes int64            `json:"thresholdValue"`
	Available      int64            `json:"available"`
	Need           int64            `json:"need"` // what the victims had to free
	Ranking        string           `json:"ranking"`
	Reclaimed      string           `json:"reclaimed,omitempty"`   // node-level reclaim done before evicting
	TriggeredAt    time.Time        `json:"triggeredAt,omitzero"`  // a kernel notification woke the agent (zero: the poll did)
	TriggeredBy    string           `json:"triggeredBy,omitempty"` // which one
	ObservedAt     time.Time        `json:"observedAt"`            // the reading that met the threshold
	WokeAt         time.Time        `json:"wokeAt"`                // the agent started this synchronization
	DecidedAt      time.Time        `json:"decidedAt"`
	KillSentAt     time.Time        `json:"killSentAt"`
	FreedAt        time.Time        `json:"freedAt,omitzero"` // every victim was gone
	Victims        []EvictionVictim `json:"victims"`
}

// EvictionVictim is one evicted pod.
type EvictionVictim struct {
	Pod      string             `json:"pod"`
	UID      types.UID          `json:"uid"`
	QoS      corev1.PodQOSClass `json:"qosClass"`
	Priority int32              `json:"priority"`
	Usage    int64              `json:"usage"`
	Request  int64              `json:"request"`
	Grace    int64              `json:"gracePeriodSeconds"`
	Message  string             `json:"message"`
	Error    string             `json:"error,omitempty"`
	// KilledAt is when the agent killed the pod's processes through its
	// cgroup (hard memory thresholds); zero: its pod worker stopped it
	// through the runtime. Sigkilled is how many processes the agent
	// signalled itself (0 where the kernel's cgroup.kill did it).
	KilledAt  time.Time `json:"killedAt,omitzero"`
	Sigkilled int       `json:"sigkilled,omitempty"`
	// KillError is why the cgroup kill failed; the pod worker still stops
	// the pod.
	KillError string `json:"killError,omitempty"`
}

// CgroupValues are one cgroup's settings and use.
type CgroupValues struct {
	Name string `json:"name"` // cgroupfs path
	Dir  string `json:"dir"`  // its directory (memory hierarchy on v1)
	// CPUShares is v1 cpu.shares; CPUWeight is v2 cpu.weight.
	CPUShares uint64 `json:"cpuShares,omitempty"`
	CPUWeight uint64 `json:"cpuWeight,omitempty"`
	// CPUQuota and CPUPeriod are in microseconds (cfs_quota_us or cpu.max).
	CPUQuota    int64  `json:"cpuQuota"`
	CPUPeriod   uint64 `json:"cpuPeriod"`
	MemoryLimit int64  `json:"memoryLimit"`
	Memory      uint64 `json:"memoryUsage"`
	WorkingSet  uint64 `json:"workingSet"`
	PidsLimit   int64  `json:"pidsLimit"`
	Pids        uint64 `json:"pids"`
}

// CgroupEntry is a cgroup of the QoS tree (GET /cgroups), depth first
// from kubepods.
type CgroupEntry struct {
	CgroupValues
	Depth  int       `json:"depth"`            // 0 for kubepods
	PodUID types.UID `json:"podUID,omitempty"` // set on pod cgroups
	Pod    string    `json:"pod,omitempty"`    // namespace/name
	QOS    string    `json:"qos,omitempty"`
}

// CPUManager is the CPU manager's state (GET /cpus): its policy, the
// reserved CPUs, the shared pool and each exclusive assignment. Under
// policy none only Policy is set.
type CPUManager struct {
	Policy            string          `json:"policy"` // none or static
	Reserved          string          `json:"reserved,omitempty"`
	SharedPool        string          `json:"sharedPool,omitempty"`
	StrictReservation bool            `json:"strictReservation,omitempty"`
	Exclusive         []CPUAssignment `json:"exclusive,omitempty"`
}

// CPUAssignment is one container's exclusive CPUs.
type CPUAssignment struct {
	PodUID    types.UID `json:"podUID"`
	Pod       string    `json:"pod,omitempty"` // namespace/name
	Container string    `json:"container"`
	CPUs      string    `json:"cpus"`
}
