package criconfig

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// envFileLimit bounds an env file read for fileKeyRef: the pod wrote it.
const envFileLimit = 1 << 20

// fileKey is a fileKeyRef's value: key in the env file at path in the
// pod's emptyDir volume, read when the container is created (after the
// init containers that write it). As in the kubelet, a key set to ""
// counts as missing; ok is false for a missing optional key.
func (b *Builder) fileKey(pod *corev1.Pod, ref *corev1.FileKeySelector) (value string, ok bool, err error) {
	optional := ref.Optional != nil && *ref.Optional
	data, err := b.host.VolumeFile(pod, ref.VolumeName, ref.Path, envFileLimit)
	if err != nil {
		return "", false, fmt.Errorf("cannot read the env file %q of volume %q referenced by FileKeyRef: %w", ref.Path, ref.VolumeName, err)
	}
	value, found, err := envFileValue(string(data), ref.Key)
	if err != nil {
		return "", false, fmt.Errorf("couldn't parse env file %q of volume %q: %w", ref.Path, ref.VolumeName, err)
	}
	if !found || value == "" {
		if optional {
			return "", false, nil
		}
		return "", false, fmt.Errorf("environment variable key %q not found in file %q of volume %q", ref.Key, ref.Path, ref.VolumeName)
	}
	return value, true, nil
}

// envFileValue is key's value in an env file (1.35's fileKeyRef), in the
// kubelet's strict subset of shell syntax: KEY='value' lines, the value
// in single quotes taken literally (newlines included), blank lines and
// '#' comments skipped, a comment allowed after the closing quote; no
// whitespace before '=', and whitespace after it makes the value empty.
// found is false when the file does not set key.
func envFileValue(content, key string) (value string, found bool, err error) {
	lines := strings.Split(content, "\n")
	for i := 0; i < len(lines); i++ {
		n := i + 1
		line := strings.TrimLeft(lines[i], " \t")
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, rest, ok := strings.Cut(line, "=")
		switch {
		case !ok:
			return "", false, fmt.Errorf("invalid environment variable format at line %d: missing '='", n)
		case strings.TrimRight(name, " \t") == "":
			return "", false, fmt.Errorf("invalid environment variable format at line %d: empty variable name", n)
		case strings.TrimRight(name, " \t") != name:
			return "", false, fmt.Errorf("invalid environment variable format at line %d: whitespace before '=' is not allowed", n)
		}
		if strings.TrimLeft(rest, " \t") != rest {
			// KEY= 'v' sets KEY to "" in a shell.
			if name == key {
				return "", true, nil
			}
			continue
		}
		if !strings.HasPrefix(rest, "'") {
			return "", false, fmt.Errorf("invalid environment variable format at line %d: value must be enclosed in single quotes", n)
		}
		var b strings.Builder
		rest = rest[1:]
		for {
			if end := strings.IndexByte(rest, '\''); end >= 0 {
				b.WriteString(rest[:end])
				if after := strings.TrimLeft(rest[end+1:], " \t"); after != "" && !strings.HasPrefix(after, "#") {
					return "", false, fmt.Errorf("invalid environment variable format at line %d: unexpected content after closing quote", i+1)
				}
				break
			}
			if i+1 >= len(lines) {
				return "", false, fmt.Errorf("invalid environment variable format at line %d: unterminated single quote", n)
			}
			b.WriteString(rest)
			b.WriteByte('\n')
			i++
			rest = lines[i]
		}
		if name == key {
			return b.String(), true, nil
		}
	}
	return "", false, nil
}
