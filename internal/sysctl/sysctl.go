// Package sysctl knows which kernel namespace a sysctl belongs to, and its
// names in dotted form: what the node checks before a pod may set one.
package sysctl

import "strings"

// Namespace is the kernel namespace a sysctl (or a prefix of sysctls)
// belongs to: "ipc", "net", or "" for a node-wide one.
func Namespace(name string) string {
	switch {
	case name == "kernel.sem", strings.HasPrefix(name, "kernel.shm"), strings.HasPrefix(name, "kernel.msg"), strings.HasPrefix(name, "fs.mqueue."):
		return "ipc"
	case strings.HasPrefix(name, "net."):
		return "net"
	}
	return ""
}

// Dots is a sysctl name with '/' separators turned into dots (and dots
// within a part into slashes), as the kernel reads both forms.
func Dots(name string) string {
	if !strings.Contains(name, "/") {
		return name
	}
	parts := strings.Split(name, "/")
	for i, p := range parts {
		parts[i] = strings.ReplaceAll(p, ".", "/")
	}
	return strings.Join(parts, ".")
}
