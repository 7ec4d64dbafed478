package eviction

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Trace is the record of one eviction decision, for `nodectl get
// evictions` and the local API.
type Trace struct {
	ID             int       `json:"id"`
	Signal         Signal    `json:"signal"`
	Threshold      string    `json:"threshold"`
	ThresholdBytes int64     `json:"thresholdValue"`
	Available      int64     `json:"available"`
	Need           int64     `json:"need"` // what the victims had to free
	Ranking        Ranking   `json:"ranking"`
	Reclaimed      string    `json:"reclaimed,omitempty"`   // node-level reclaim done before evicting
	TriggeredAt    time.Time `json:"triggeredAt,omitzero"`  // a kernel notification woke the agent (zero: the poll did)
	TriggeredBy    string    `json:"triggeredBy,omitempty"` // which one (a WokenBy source)
	ObservedAt     time.Time `json:"observedAt"`            // the reading that met the threshold
	WokeAt         time.Time `json:"wokeAt"`                // the agent started this synchronization
	DecidedAt      time.Time `json:"decidedAt"`
	KillSentAt     time.Time `json:"killSentAt"`
	FreedAt        time.Time `json:"freedAt,omitzero"` // every victim was gone
	Victims        []Victim  `json:"victims"`
}

// Victim is one evicted pod.
type Victim struct {
	Pod      string             `json:"pod"`
	UID      types.UID          `json:"uid"`
	QoS      corev1.PodQOSClass `json:"qosClass"`
	Priority int32              `json:"priority"`
	Usage    int64              `json:"usage"`
	Request  int64              `json:"request"`
	Grace    int64              `json:"gracePeriodSeconds"`
	Message  string             `json:"message"`
	Error    string             `json:"error,omitempty"`
}
