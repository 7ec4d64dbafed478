package eviction

import (
	"nodeagent/api"
)

// Trace is the record of one eviction decision, for the local API.
type Trace = api.EvictionTrace

// Victim is one evicted pod.
type Victim = api.EvictionVictim
