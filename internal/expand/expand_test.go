package expand

import "testing"

func TestExpand(t *testing.T) {
	vars := map[string]string{"A": "1", "B": "two"}
	lookup := func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
	for in, want := range map[string]string{
		"plain":          "plain",
		"$(A)":           "1",
		"x$(A)y$(B)z":    "x1ytwoz",
		"$(MISSING)":     "$(MISSING)",
		"$$(A)":          "$(A)",
		"$$":             "$",
		"cost $5":        "cost $5",
		"$(A":            "$(A",
		"trailing $":     "trailing $",
		"$(A)$(A)$$$(B)": "11$two",
	} {
		if got := Vars(in, lookup); got != want {
			t.Errorf("Vars(%q) = %q, want %q", in, got, want)
		}
	}
}
