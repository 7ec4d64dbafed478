package metrics

import (
	"strings"
	"testing"
)

func TestHistogramText(t *testing.T) {
	h := NewHistogram([]float64{0.1, 1})
	for _, v := range []float64{0.05, 0.5, 0.5, 3} {
		h.Observe(v)
	}
	var b strings.Builder
	h.Write(&b, "x_seconds", `k="v"`)
	want := `x_seconds_bucket{k="v",le="0.1"} 1
x_seconds_bucket{k="v",le="1"} 3
x_seconds_bucket{k="v",le="+Inf"} 4
x_seconds_sum{k="v"} 4.05
x_seconds_count{k="v"} 4
`
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
	b.Reset()
	NewHistogram([]float64{1}).Write(&b, "y", "")
	if !strings.Contains(b.String(), `y_bucket{le="1"} 0`) || !strings.Contains(b.String(), "y_count 0") {
		t.Errorf("unlabelled: %s", b.String())
	}
}
