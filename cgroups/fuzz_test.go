package cgroups

import (
	"bytes"
	"math"
	"testing"
)

// The stat files are the kernel's, but the parsers must hold on anything:
// no panic, and what they accept is in range.
func FuzzParsePressure(f *testing.F) {
	f.Add([]byte("some avg10=0.00 avg60=0.00 avg300=0.00 total=0\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"))
	f.Add([]byte("some avg10=12.34 avg60=5.00 avg300=1.00 total=123456789\n"))
	f.Add([]byte("some avg10=NaN avg60=Inf avg300=-1 total=1\n"))
	f.Add([]byte("full total=18446744073709551616\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := ParsePressure(b)
		if err != nil {
			return
		}
		for _, l := range []PressureLine{p.Some, p.Full} {
			for _, v := range []float64{l.Avg10, l.Avg60, l.Avg300} {
				if math.IsNaN(v) || v < 0 || v > 100 {
					t.Fatalf("accepted average %v from %q", v, b)
				}
			}
		}
	})
}

func FuzzParseFlatKeyed(f *testing.F) {
	f.Add([]byte("cache 4096\nrss 8192\ntotal_inactive_file 100\n"))
	f.Add([]byte("MemTotal:       24532564 kB\nMemAvailable:   23000000 kB\n"))
	f.Add([]byte("oom 0\noom_kill 3\nunder_oom 0\n"))
	f.Add([]byte("x -1\ny 18446744073709551616\nz\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParseFlatKeyed(bytes.NewReader(b))
		if err != nil {
			return
		}
		if len(m) > bytes.Count(b, []byte("\n"))+1 {
			t.Fatalf("%d keys from %d lines", len(m), bytes.Count(b, []byte("\n"))+1)
		}
	})
}
