// Package expand implements the kubelet's $(VAR) expansion of container
// commands, args and env values.
package expand

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Mapping looks up the static values of env, the only variables
// $(VAR) references may use in commands, args and probe commands.
func Mapping(env []corev1.EnvVar) func(string) (string, bool) {
	m := map[string]string{}
	for _, e := range env {
		m[e.Name] = e.Value
	}
	return func(name string) (string, bool) { v, ok := m[name]; return v, ok }
}

// Vars replaces $(VAR) with its value when defined, keeps unknown
// references as written, and turns $$ into $, as the kubelet expands
// commands, args and env values.
func Vars(s string, lookup func(string) (string, bool)) string {
	if !strings.Contains(s, "$") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch next := s[i+1]; {
		case next == '$':
			b.WriteByte('$')
			i++
		case next == '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString(s[i:])
				return b.String()
			}
			name := s[i+2 : i+2+end]
			if v, ok := lookup(name); ok {
				b.WriteString(v)
			} else {
				b.WriteString("$(" + name + ")")
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}
