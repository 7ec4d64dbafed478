package cpumanager

import (
	"strings"
	"testing"

	"k8s.io/utils/cpuset"
)

func TestTakePacksAsTheKubelet(t *testing.T) {
	// 2 sockets × 4 cores × 2 threads: CPU n and n+8 are siblings.
	smt := Uniform(2, 4, 2)
	for _, tc := range []struct {
		name  string
		topo  Topology
		avail string
		n     int
		want  string
	}{
		{"one CPU of a plain node is the lowest", Uniform(1, 2, 1), "1", 1, "1"},
		{"lowest free first", Uniform(1, 4, 1), "0-3", 2, "0-1"},
		{"a whole socket when the request covers one", smt, "0-15", 8, "0-3,8-11"},
		{"whole cores before threads", smt, "0-15", 2, "0,8"},
		{"a half-used core is filled first", smt, "1-15", 1, "8"},
		{"the socket with fewer free CPUs is used first", smt, "1-3,5-11,13-15", 2, "5,13"},
		{"a socket and a core", smt, "0-15", 10, "0-4,8-12"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := take(tc.topo, mustParse(t, tc.avail), tc.n)
			if err != nil {
				t.Fatal(err)
			}
			if got.String() != tc.want {
				t.Fatalf("take %d of %s = %s, want %s", tc.n, tc.avail, got, tc.want)
			}
		})
	}
}

func TestTakeRefusesMoreThanAvailable(t *testing.T) {
	_, err := take(Uniform(1, 2, 1), cpuset.New(1), 2)
	if err == nil || !strings.Contains(err.Error(), "not enough cpus available to satisfy request: requested=2, available=1") {
		t.Fatalf("err = %v", err)
	}
}

func mustParse(t *testing.T, s string) cpuset.CPUSet {
	t.Helper()
	set, err := cpuset.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return set
}
