package cgroups

import (
	"math"
	"testing"
)

func TestSystemdUnitNames(t *testing.T) {
	for name, want := range map[string]Name{
		"kubepods.slice":                        {"kubepods"},
		"kubepods-burstable.slice":              {"kubepods", "burstable"},
		"kubepods-burstable-pod1234_abcd.slice": {"kubepods", "burstable", "pod1234-abcd"},
		"kubepods-podc0ffee.slice":              {"kubepods", "podc0ffee"},
		"test-kubepods-besteffort-pod1.slice":   {"test", "kubepods", "besteffort", "pod1"},
	} {
		if got := Unit(want); got != name {
			t.Errorf("Unit(%v) = %q, want %q", want, got, name)
		}
	}
}

func TestSystemdProperties(t *testing.T) {
	shares, quota, period, mem, pids := uint64(256), int64(25000), uint64(100000), int64(64<<20), int64(100)
	got := map[string]any{}
	for _, p := range SystemdProperties(&ResourceConfig{CPUShares: &shares, CPUQuota: &quota, CPUPeriod: &period, Memory: &mem, PidsLimit: &pids}) {
		got[p.Name] = p.Value.Value()
	}
	want := map[string]any{"CPUWeight": uint64(10), "CPUQuotaPerSecUSec": uint64(250000), "CPUQuotaPeriodUSec": uint64(100000), "MemoryMax": uint64(64 << 20), "TasksMax": uint64(100)}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	// A quota of 1.5 ms per 100 ms rounds up to 20 ms per second.
	q := int64(1500)
	for _, p := range SystemdProperties(&ResourceConfig{CPUQuota: &q, CPUPeriod: &period}) {
		if p.Name == "CPUQuotaPerSecUSec" && p.Value.Value() != uint64(20000) {
			t.Errorf("rounded quota = %v, want 20000", p.Value.Value())
		}
	}
	unlimited := int64(-1)
	for _, p := range SystemdProperties(&ResourceConfig{CPUQuota: &unlimited, CPUPeriod: &period}) {
		if p.Name == "CPUQuotaPerSecUSec" && p.Value.Value() != uint64(math.MaxUint64) {
			t.Errorf("unlimited quota = %v", p.Value.Value())
		}
	}
}
