// Package sat is saturating arithmetic for numbers that come from pod specs
// and configuration: a sum, product or conversion that would overflow int64
// or time.Duration stays at the bound instead of wrapping. A wrapped value
// is worse than a large one: a memory limit that wraps negative reads as
// "no limit", a grace period that wraps is a deadline in the past.
package sat

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
)

// Add is a+b, held at math.MaxInt64 or math.MinInt64.
func Add(a, b int64) int64 {
	s := a + b
	switch {
	case a > 0 && b > 0 && s < 0:
		return math.MaxInt64
	case a < 0 && b < 0 && s >= 0:
		return math.MinInt64
	}
	return s
}

// Mul is a*b, held at math.MaxInt64 or math.MinInt64.
func Mul(a, b int64) int64 {
	if a == 0 || b == 0 {
		return 0
	}
	p := a * b
	if p/b != a || (a == -1 && b == math.MinInt64) || (b == -1 && a == math.MinInt64) {
		if (a > 0) == (b > 0) {
			return math.MaxInt64
		}
		return math.MinInt64
	}
	return p
}

// MaxSeconds is the most whole seconds a Duration holds.
const MaxSeconds = math.MaxInt64 / int64(time.Second)

// Seconds is n seconds as a Duration, at most the longest Duration (about
// 292 years): a huge grace period means "as long as can be waited".
func Seconds(n int64) time.Duration {
	switch {
	case n > MaxSeconds:
		return time.Duration(math.MaxInt64)
	case n < -MaxSeconds:
		return time.Duration(math.MinInt64)
	}
	return time.Duration(n) * time.Second
}

var (
	maxValue = *resource.NewQuantity(math.MaxInt64, resource.DecimalSI)
	minValue = *resource.NewQuantity(math.MinInt64, resource.DecimalSI)
	maxMilli = *resource.NewMilliQuantity(math.MaxInt64, resource.DecimalSI)
	minMilli = *resource.NewMilliQuantity(math.MinInt64, resource.DecimalSI)
)

// Value is q in whole units (rounded up, as Quantity.Value), held within
// int64. Quantity.Value itself wraps: 1e19 reads as 0 and 2^63 as -2^63.
func Value(q resource.Quantity) int64 { return held(q, minValue, maxValue, q.Value) }

// MilliValue is q in thousandths (rounded up), held within int64.
func MilliValue(q resource.Quantity) int64 { return held(q, minMilli, maxMilli, q.MilliValue) }

// FitsValue reports whether q in whole units fits in int64 without
// saturating; FitsMilli the same in thousandths.
func FitsValue(q resource.Quantity) bool { return fits(q, minValue, maxValue) }

// FitsMilli reports whether q in thousandths fits in int64.
func FitsMilli(q resource.Quantity) bool { return fits(q, minMilli, maxMilli) }

func fits(q, lo, hi resource.Quantity) bool {
	return !huge(q) && q.Cmp(hi) <= 0 && q.Cmp(lo) >= 0
}

// held is exact() when q lies within [lo, hi], else the bound it passed.
func held(q, lo, hi resource.Quantity, exact func() int64) int64 {
	switch {
	case fits(q, lo, hi):
		return exact()
	case q.Sign() < 0:
		return math.MinInt64
	}
	return math.MaxInt64
}

// MaxExponent bounds the decimal exponent a quantity may be written with
// (1e18, 5e-9). Quantities are exact decimals: parsing "1e-100000000"
// rounds through a number of a hundred million digits, and comparing
// "1e100000000" builds one; both take minutes. No amount the agent takes
// needs more than int64's 19 digits.
const MaxExponent = 30

var exponentPattern = regexp.MustCompile(`^[+-]?[0-9.]*[eE]([+-]?[0-9]+)$`)

// CheckExponent refuses quantity text written with an exponent beyond
// ±MaxExponent, before it is parsed.
func CheckExponent(text string) error {
	m := exponentPattern.FindStringSubmatch(strings.TrimSpace(text))
	if m == nil {
		return nil
	}
	if e, err := strconv.Atoi(m[1]); err != nil || e > MaxExponent || e < -MaxExponent {
		return fmt.Errorf("exponent must be between -%d and %d", MaxExponent, MaxExponent)
	}
	return nil
}

// ParseQuantity is resource.ParseQuantity after CheckExponent.
func ParseQuantity(text string) (resource.Quantity, error) {
	if err := CheckExponent(text); err != nil {
		return resource.Quantity{}, err
	}
	return resource.ParseQuantity(text)
}

// huge reports, without arithmetic, a quantity of more than 30 decimal
// digits: beyond int64 whatever the unit. Comparing one (1e100000000, say)
// costs the decimal library time and memory in its exponent, minutes of
// both for a pod spec of a few bytes.
func huge(q resource.Quantity) bool {
	d := q.AsDec()
	digits := int64(d.UnscaledBig().BitLen())*30103/100000 + 1
	return digits-int64(d.Scale()) > 30
}
