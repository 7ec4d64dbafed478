package bytesize

import "testing"

func TestBinary(t *testing.T) {
	for b, want := range map[uint64]string{0: "0B", 1023: "1023B", 1024: "1.0Ki", 256 << 20: "256.0Mi", 2831155200: "2.6Gi", 1 << 62: "4.0Ei"} {
		if got := Binary(b); got != want {
			t.Errorf("Binary(%d) = %q, want %q", b, got, want)
		}
	}
}
