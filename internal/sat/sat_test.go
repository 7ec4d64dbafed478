package sat

import (
	"math"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
)

func TestAddAndMulHoldAtTheBounds(t *testing.T) {
	for _, c := range []struct {
		name      string
		got, want int64
	}{
		{"add", Add(2, 3), 5},
		{"add over", Add(math.MaxInt64, 1), math.MaxInt64},
		{"add under", Add(math.MinInt64, -1), math.MinInt64},
		{"add mixed", Add(math.MaxInt64, math.MinInt64), -1},
		{"mul", Mul(-4, 5), -20},
		{"mul over", Mul(math.MaxInt64/2, 3), math.MaxInt64},
		{"mul under", Mul(math.MaxInt64/2, -3), math.MinInt64},
		{"mul min by -1", Mul(math.MinInt64, -1), math.MaxInt64},
		{"mul zero", Mul(0, math.MaxInt64), 0},
	} {
		if c.got != c.want {
			t.Errorf("%s: got %d, want %d", c.name, c.got, c.want)
		}
	}
}

func TestSecondsNeverWraps(t *testing.T) {
	if got := Seconds(30); got != 30*time.Second {
		t.Errorf("30 s: %v", got)
	}
	// 1e10 s * 1e9 wraps an int64 to a negative Duration.
	if got := Seconds(1e10); got != time.Duration(math.MaxInt64) {
		t.Errorf("1e10 s: got %v, want the longest Duration", got)
	}
	if got := Seconds(math.MaxInt64); got <= 0 {
		t.Errorf("MaxInt64 s: got %v", got)
	}
}

func TestQuantitiesBeyondInt64Saturate(t *testing.T) {
	for _, c := range []struct {
		q           string
		value, mill int64
		fits, fitsM bool
	}{
		{"1", 1, 1000, true, true},
		{"1e19", math.MaxInt64, math.MaxInt64, false, false},
		{"1e30", math.MaxInt64, math.MaxInt64, false, false},
		{"9223372036854775807", math.MaxInt64, math.MaxInt64, true, false},
		{"9223372036854775808", math.MaxInt64, math.MaxInt64, false, false},
		{"-1e30", math.MinInt64, math.MinInt64, false, false},
		{"100m", 1, 100, true, true},
	} {
		q := resource.MustParse(c.q)
		if got := Value(q); got != c.value {
			t.Errorf("Value(%s) = %d, want %d (Quantity.Value gives %d)", c.q, got, c.value, q.Value())
		}
		if got := MilliValue(q); got != c.mill {
			t.Errorf("MilliValue(%s) = %d, want %d", c.q, got, c.mill)
		}
		if FitsValue(q) != c.fits || FitsMilli(q) != c.fitsM {
			t.Errorf("%s: fits %v/%v, want %v/%v", c.q, FitsValue(q), FitsMilli(q), c.fits, c.fitsM)
		}
	}
}

// A quantity with a huge exponent is judged by its size, not compared:
// comparing 1e100000000 took the decimal library over a minute.
func TestHugeExponentsAreJudgedWithoutArithmetic(t *testing.T) {
	for _, s := range []string{"1e100000000", "-1e100000000", "1e2147483647"} {
		q, err := resource.ParseQuantity(s)
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			if FitsValue(q) || FitsMilli(q) {
				t.Errorf("%s fits", s)
			}
			if v := Value(q); v != math.MaxInt64 && v != math.MinInt64 {
				t.Errorf("Value(%s) = %d", s, v)
			}
		}()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: still comparing after 5 s", s)
		}
	}
}
