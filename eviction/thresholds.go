package eviction

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"nodeagent/internal/sat"
)

// Signal is an eviction signal, named as the kubelet names it.
type Signal string

const (
	MemoryAvailable            Signal = "memory.available"
	AllocatableMemoryAvailable Signal = "allocatableMemory.available"
	NodeFsAvailable            Signal = "nodefs.available"
	NodeFsInodesFree           Signal = "nodefs.inodesFree"
	ImageFsAvailable           Signal = "imagefs.available"
	ImageFsInodesFree          Signal = "imagefs.inodesFree"
	PIDAvailable               Signal = "pid.available"
	// EmptyDirLimit is the kubelet's internal signal for an emptyDir over
	// its sizeLimit; it has no threshold or node condition.
	EmptyDirLimit Signal = "emptydirfs.limit"
	// PodEphemeralLimit and ContainerEphemeralLimit are its signals for a
	// pod over its ephemeral-storage limit, and a container over its own.
	PodEphemeralLimit       Signal = "ephemeralpodfs.limit"
	ContainerEphemeralLimit Signal = "ephemeralcontainerfs.limit"
)

// signals lists every signal with the node condition it raises and the
// resource it starves, in the kubelet's eviction priority order (memory
// first).
var signals = []struct {
	signal    Signal
	condition corev1.NodeConditionType
	resource  corev1.ResourceName
}{
	{MemoryAvailable, corev1.NodeMemoryPressure, corev1.ResourceMemory},
	{AllocatableMemoryAvailable, corev1.NodeMemoryPressure, corev1.ResourceMemory},
	{NodeFsAvailable, corev1.NodeDiskPressure, corev1.ResourceEphemeralStorage},
	{NodeFsInodesFree, corev1.NodeDiskPressure, "inodes"},
	{ImageFsAvailable, corev1.NodeDiskPressure, corev1.ResourceEphemeralStorage},
	{ImageFsInodesFree, corev1.NodeDiskPressure, "inodes"},
	{PIDAvailable, corev1.NodePIDPressure, "pids"},
}

func signalInfo(s Signal) (corev1.NodeConditionType, corev1.ResourceName, int, bool) {
	for i, x := range signals {
		if x.signal == s {
			return x.condition, x.resource, i, true
		}
	}
	return "", "", 0, false
}

// Condition is the node condition a signal's pressure raises.
func (s Signal) Condition() corev1.NodeConditionType { c, _, _, _ := signalInfo(s); return c }

// Resource is what a signal's pressure starves.
func (s Signal) Resource() corev1.ResourceName { _, r, _, _ := signalInfo(s); return r }

// Value is a threshold amount: a quantity or a percentage of capacity.
type Value struct {
	Quantity   *resource.Quantity
	Percentage float64 // 0..1
}

// Of resolves v against a capacity.
func (v Value) Of(capacity int64) int64 {
	if v.Quantity != nil {
		return v.Quantity.Value()
	}
	return int64(float64(capacity) * v.Percentage)
}

func (v Value) String() string {
	if v.Quantity != nil {
		return v.Quantity.String()
	}
	return strconv.FormatFloat(v.Percentage*100, 'f', -1, 64) + "%"
}

// Threshold is one eviction threshold: the signal below Value. A soft
// threshold has a GracePeriod the observation must last before it counts.
type Threshold struct {
	Signal      Signal
	Value       Value
	GracePeriod time.Duration
	MinReclaim  *Value
	Hard        bool
}

func (t Threshold) String() string {
	kind := "evictionHard"
	if !t.Hard {
		kind = "evictionSoft"
	}
	return fmt.Sprintf("%s %s<%s", kind, t.Signal, t.Value)
}

// Config is the eviction part of the KubeletConfiguration.
type Config struct {
	Hard, Soft, SoftGracePeriod, MinimumReclaim map[string]string
	// EnforcePods copies memory.available's hard threshold to
	// allocatableMemory.available, as the kubelet does when
	// enforceNodeAllocatable holds "pods".
	EnforcePods bool
}

// ParseThresholds turns the configuration into thresholds with the
// kubelet's rules: "signal<quantity" or "signal<pct%", 0% and 100% mean
// disabled, quantities must be positive, every soft threshold needs a
// grace period. Errors name the field and the offending text.
func ParseThresholds(c Config) ([]Threshold, error) {
	var out []Threshold
	var errs []error
	parse := func(field string, m map[string]string, hard bool) {
		for _, k := range slices.Sorted(maps.Keys(m)) {
			sig := Signal(k)
			if _, _, _, ok := signalInfo(sig); !ok {
				errs = append(errs, fmt.Errorf("%s.%s: invalid value %q: unknown eviction signal", field, k, m[k]))
				continue
			}
			v, skip, err := parseValue(m[k])
			if err != nil {
				errs = append(errs, fmt.Errorf("%s.%s: invalid value %q: %w", field, k, m[k], err))
				continue
			}
			if skip {
				continue
			}
			t := Threshold{Signal: sig, Value: v, Hard: hard}
			if !hard {
				g, ok := c.SoftGracePeriod[k]
				if !ok {
					errs = append(errs, fmt.Errorf("%s.%s: invalid value %q: grace period must be specified for the soft eviction threshold (evictionSoftGracePeriod.%s)", field, k, m[k], k))
					continue
				}
				d, err := time.ParseDuration(g)
				if err != nil || d < 0 {
					errs = append(errs, fmt.Errorf("evictionSoftGracePeriod.%s: invalid value %q: must be a non-negative duration", k, g))
					continue
				}
				t.GracePeriod = d
			}
			if r, ok := c.MinimumReclaim[k]; ok {
				mv, skip, err := parseValue(r)
				if err != nil {
					errs = append(errs, fmt.Errorf("evictionMinimumReclaim.%s: invalid value %q: %w", k, r, err))
					continue
				}
				if !skip {
					t.MinReclaim = &mv
				}
			}
			out = append(out, t)
		}
	}
	parse("evictionHard", c.Hard, true)
	parse("evictionSoft", c.Soft, false)
	for _, k := range slices.Sorted(maps.Keys(c.SoftGracePeriod)) {
		if _, ok := c.Soft[k]; !ok {
			errs = append(errs, fmt.Errorf("evictionSoftGracePeriod.%s: invalid value %q: no evictionSoft threshold for this signal", k, c.SoftGracePeriod[k]))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(c.MinimumReclaim)) {
		if _, _, _, ok := signalInfo(Signal(k)); !ok {
			errs = append(errs, fmt.Errorf("evictionMinimumReclaim.%s: invalid value %q: unknown eviction signal", k, c.MinimumReclaim[k]))
		}
	}
	if c.EnforcePods {
		for _, t := range append([]Threshold(nil), out...) {
			if t.Signal == MemoryAvailable && t.Hard && !has(out, AllocatableMemoryAvailable, true) {
				t.Signal = AllocatableMemoryAvailable
				out = append(out, t)
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

func has(ts []Threshold, s Signal, hard bool) bool {
	for _, t := range ts {
		if t.Signal == s && t.Hard == hard {
			return true
		}
	}
	return false
}

// parseValue parses "100Mi" or "10%"; skip reports 0% or 100%, which the
// kubelet treats as "not set".
func parseValue(s string) (v Value, skip bool, err error) {
	s = strings.TrimSpace(s)
	if p, ok := strings.CutSuffix(s, "%"); ok {
		f, err := strconv.ParseFloat(p, 64)
		// NaN passes every comparison: "NaN%" silently disabled the threshold.
		if err != nil || math.IsNaN(f) || f < 0 || f > 100 {
			return Value{}, false, errors.New("percentage must be between 0% and 100%")
		}
		if f == 0 || f == 100 {
			return Value{}, true, nil
		}
		return Value{Percentage: f / 100}, false, nil
	}
	q, err := sat.ParseQuantity(s)
	if err != nil {
		return Value{}, false, errors.New("must be a quantity (100Mi) or a percentage (10%)")
	}
	if q.Sign() <= 0 {
		return Value{}, false, errors.New("eviction threshold must be positive")
	}
	if !sat.FitsValue(q) {
		return Value{}, false, fmt.Errorf("must be at most %d", int64(math.MaxInt64))
	}
	return Value{Quantity: &q}, false, nil
}

// CheckAgainstCapacity refuses thresholds that every observation would
// meet on this node (memory.available<200Gi on a 24Gi node): acting on them
// would evict every pod at once.
func CheckAgainstCapacity(ts []Threshold, capacity map[Signal]int64) error {
	var errs []error
	for _, t := range ts {
		c, ok := capacity[t.Signal]
		if !ok || c <= 0 {
			continue
		}
		if t.Value.Of(c) >= c {
			errs = append(errs, fmt.Errorf("%s is at or above the node's capacity for it (%s): every observation would meet it and every pod would be evicted",
				t, resource.NewQuantity(c, resource.BinarySI)))
		}
	}
	return errors.Join(errs...)
}
