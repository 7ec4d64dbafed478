package criconfig

import (
	"strings"
	"testing"
)

// The kubelet's env file rules (pkg/kubelet/util/env ParseEnv).
func TestEnvFileValue(t *testing.T) {
	file := "# settings\n\n  A='one'\nB='two' # a comment\nC='multi\nline'\nD= 'ignored'\nE=''\n"
	for key, want := range map[string]string{"A": "one", "B": "two", "C": "multi\nline", "D": "", "E": ""} {
		if v, found, err := envFileValue(file, key); err != nil || !found || v != want {
			t.Errorf("%s: %q %v %v, want %q", key, v, found, err, want)
		}
	}
	if _, found, err := envFileValue(file, "MISSING"); err != nil || found {
		t.Errorf("a key the file lacks: found %v err %v", found, err)
	}
	for _, bad := range []struct{ file, why string }{
		{"A\n", "missing '='"},
		{"='x'\n", "empty variable name"},
		{"A ='x'\n", "whitespace before '='"},
		{"A=x\n", "single quotes"},
		{"A='x' y\n", "after closing quote"},
		{"A='x\n", "unterminated"},
	} {
		if _, _, err := envFileValue(bad.file, "A"); err == nil || !strings.Contains(err.Error(), bad.why) {
			t.Errorf("%q: %v, want an error saying %q", bad.file, err, bad.why)
		}
	}
}
