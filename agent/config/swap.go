package config

import "fmt"

// Swap behaviours (memorySwap.swapBehavior).
const (
	NoSwap      = "NoSwap"
	LimitedSwap = "LimitedSwap"
)

// LimitedSwap reports whether Burstable containers may swap
// (memorySwap.swapBehavior: LimitedSwap); anything else is NoSwap, the
// kubelet's default.
func (c *Config) LimitedSwap() bool { return c.MemorySwap.SwapBehavior == LimitedSwap }

// FailOnSwap is failSwapOn (default true): refuse to start while the host
// has swap on.
func (c *Config) FailOnSwap() bool { return c.FailSwapOn == nil || *c.FailSwapOn }

// validateSwap checks memorySwap.swapBehavior in the kubelet's words.
func (c *Config) validateSwap() []error {
	switch c.MemorySwap.SwapBehavior {
	case "", NoSwap, LimitedSwap:
		return nil
	}
	return []error{fmt.Errorf(`memorySwap.swapBehavior: invalid value %q: must be one of: "", LimitedSwap or NoSwap`, c.MemorySwap.SwapBehavior)}
}
