// Package config loads the agent's configuration: a KubeletConfiguration
// (kubelet.config.k8s.io/v1beta1) YAML or JSON file, the kubelet's own
// format, of which nodeagent honours the fields listed in Honoured. Unknown
// fields and fields nodeagent does not implement produce warnings; invalid
// values produce one error per field, naming the field and the value.
// Defaults (Defaults) are applied to every field left unset.
package config
