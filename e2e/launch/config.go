package launch

import (
	"fmt"
	"strings"

	"sigs.k8s.io/yaml"
)

// withConfig is the launcher's configuration with the caller's fields
// (Options.Config, KubeletOptions.Config) in place of its own: a field
// given twice is refused by strict decoding, and the caller's wins here.
// The caller's top-level fields replace whole values (evictionHard's map
// too).
func withConfig(base, extra string) (string, error) {
	if strings.TrimSpace(extra) == "" {
		return base, nil
	}
	var b, e map[string]any
	if err := yaml.Unmarshal([]byte(base), &b); err != nil {
		return "", fmt.Errorf("launch: the launcher's configuration: %w", err)
	}
	if err := yaml.Unmarshal([]byte(extra), &e); err != nil {
		return "", fmt.Errorf("launch: Config is not a YAML map: %w", err)
	}
	for k, v := range e {
		b[k] = v
	}
	out, err := yaml.Marshal(b)
	if err != nil {
		return "", err
	}
	return string(out), nil
}
