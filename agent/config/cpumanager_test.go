package config

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestCPUManagerFieldsAreCheckedAndNamed(t *testing.T) {
	for _, tc := range []struct {
		body, want string
	}{
		{"cpuManagerPolicy: dynamic\n", `cpuManagerPolicy: invalid value "dynamic": want none or static`},
		{"cpuManagerPolicy: static\n", "the static policy needs reserved CPUs"},
		{"cpuManagerPolicy: static\nreservedSystemCPUs: 0-x\n", `reservedSystemCPUs: invalid value "0-x"`},
		{"cpuManagerPolicy: static\nreservedSystemCPUs: \"0\"\ncpuManagerPolicyOptions:\n  distribute-cpus-across-cores: \"true\"\n", `cpuManagerPolicyOptions.distribute-cpus-across-cores: invalid value "true": nodeagent does not run this option`},
		{"cpuManagerPolicy: static\nreservedSystemCPUs: \"0\"\ncpuManagerPolicyOptions:\n  distribute-cpus-across-numa: \"true\"\n  prefer-align-cpus-by-uncorecache: \"true\"\n", `cpuManagerPolicyOptions: invalid value "prefer-align-cpus-by-uncorecache": can not be used with distribute-cpus-across-numa`},
		{"cpuManagerPolicy: static\nreservedSystemCPUs: \"0\"\ncpuManagerPolicyOptions:\n  full-pcpus-olny: \"true\"\n", `cpuManagerPolicyOptions: invalid value "full-pcpus-olny": unknown option`},
		{"cpuManagerPolicy: static\nreservedSystemCPUs: \"0\"\ncpuManagerPolicyOptions:\n  full-pcpus-only: \"yes\"\n", `cpuManagerPolicyOptions.full-pcpus-only: invalid value "yes": want true or false`},
		{"cpuManagerPolicyOptions:\n  strict-cpu-reservation: \"true\"\n", "options need cpuManagerPolicy: static"},
		{"memoryManagerPolicy: Static\n", `memoryManagerPolicy: invalid value "Static": nodeagent has no memory manager`},
		{"topologyManagerPolicy: single-numa-node\n", `topologyManagerPolicy: invalid value "single-numa-node"`},
	} {
		_, err := Load(write(t, header+tc.body))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err = %v, want %q", tc.body, err, tc.want)
		}
	}
}

func TestStaticPolicyAcceptedWithReservedCPUs(t *testing.T) {
	cfg, err := Load(write(t, header+"cpuManagerPolicy: static\nreservedSystemCPUs: \"0\"\nkubeReserved:\n  cpu: 500m\n  memory: 100Mi\nsystemReserved:\n  cpu: 200m\ncpuManagerPolicyOptions:\n  strict-cpu-reservation: \"true\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.CPUManagerStatic() || !cfg.StrictCPUReservation() || cfg.ReservedCPUs().String() != "0" || len(cfg.Warnings) > 0 {
		t.Fatalf("static %v strict %v reserved %s warnings %q", cfg.CPUManagerStatic(), cfg.StrictCPUReservation(), cfg.ReservedCPUs(), cfg.Warnings)
	}
	// reservedSystemCPUs replaces the reserved cpu of both, as one CPU.
	r := cfg.Reserved()
	sys, kube := r[0][corev1.ResourceCPU], r[1][corev1.ResourceCPU]
	if sys.String() != "1" || !kube.IsZero() || r[1].Memory().String() != "100Mi" {
		t.Fatalf("reserved %v", r)
	}
	cfg, err = Load(write(t, header+"cpuManagerPolicy: static\nkubeReserved:\n  cpu: 500m\nsystemReserved:\n  cpu: 700m\n"))
	if err != nil {
		t.Fatal(err)
	}
	if n := cfg.ReservedCPUCount(); n != 2 {
		t.Fatalf("1.2 reserved CPUs count as %d, want 2", n)
	}
}

// TestCPUPolicyOptionsReadAsTheKubelet: full-pcpus-only runs; an option
// nodeagent does not run is taken when off, as the upstream suites write
// prefer-align-cpus-by-uncorecache: "false" on a node with one L3 cache.
func TestCPUPolicyOptionsReadAsTheKubelet(t *testing.T) {
	cfg, err := Load(write(t, header+"cpuManagerPolicy: static\nreservedSystemCPUs: \"0\"\ncpuManagerPolicyOptions:\n  full-pcpus-only: \"True\"\n  prefer-align-cpus-by-uncorecache: \"false\"\n  strict-cpu-reservation: \"0\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.FullPCPUsOnly() || cfg.StrictCPUReservation() {
		t.Errorf("full-pcpus-only %v, strict %v; want true, false", cfg.FullPCPUsOnly(), cfg.StrictCPUReservation())
	}
}
