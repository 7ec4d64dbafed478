package metrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestCounterValue(t *testing.T) {
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "x_total", Help: "x"})
	c.Add(3)
	if v := CounterValue(c); v != 3 {
		t.Errorf("CounterValue = %v, want 3", v)
	}
	text, err := Text(c)
	if err != nil || text != "# HELP x_total x\n# TYPE x_total counter\nx_total 3\n" {
		t.Errorf("Text = %q, %v", text, err)
	}
}
