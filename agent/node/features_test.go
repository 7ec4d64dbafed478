package node

import (
	"slices"
	"testing"

	"k8s.io/component-helpers/nodedeclaredfeatures/features"
)

// Every feature of the framework the agent builds with is either declared
// or named as missing: a module bump that brings a new one fails here
// until someone decides. Declared ones must be real features.
func TestEveryFrameworkFeatureIsDeclaredOrNamedMissing(t *testing.T) {
	known := map[string]bool{}
	for _, f := range features.AllFeatures {
		known[f.Name()] = true
		_, missing := missingFeatures[f.Name()]
		declared := slices.Contains(implementedFeatures, f.Name())
		switch {
		case declared && missing:
			t.Errorf("%s is both declared and named missing", f.Name())
		case !declared && !missing:
			t.Errorf("%s (new in the framework) is neither declared nor named missing: decide whether the agent implements it", f.Name())
		}
	}
	for _, name := range implementedFeatures {
		if !known[name] {
			t.Errorf("declared feature %s is not the framework's", name)
		}
	}
	for name := range missingFeatures {
		if !known[name] {
			t.Errorf("missing feature %s is not the framework's (renamed or removed upstream?)", name)
		}
	}
	if got := DeclaredFeatures(); !slices.IsSorted(got) {
		t.Errorf("declared features not sorted: %v", got)
	}
}
