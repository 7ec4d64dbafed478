package cgroups

import (
	"fmt"
	"path"
	"strings"
)

// Name is a driver-neutral cgroup name: {"kubepods", "burstable", "pod<uid>"}.
// Components never contain "/" (a path separator) or "_" (systemd's escape
// for "-"), as in the kubelet.
type Name []string

// Child returns the name of a child cgroup.
func (n Name) Child(component string) Name {
	out := make(Name, 0, len(n)+1)
	out = append(out, n...)
	return append(out, component)
}

// Validate rejects components the drivers cannot represent.
func (n Name) Validate() error {
	for _, c := range n {
		if c == "" || strings.ContainsAny(c, "/_") {
			return fmt.Errorf("invalid cgroup name component %q in %v: must be non-empty without '/' or '_'", c, []string(n))
		}
	}
	return nil
}

// Cgroupfs is the cgroupfs driver's path: "/kubepods/burstable/pod<uid>".
func (n Name) Cgroupfs() string {
	return "/" + path.Join(n...)
}

// Systemd is the systemd driver's path, with "-" escaped as "_" and every
// level expanded into its parent slices:
// {"kubepods","burstable","pod1-2"} becomes
// "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1_2.slice".
func (n Name) Systemd() string {
	if len(n) == 0 {
		return "/"
	}
	var b strings.Builder
	prefix := ""
	for _, c := range n {
		unit := strings.ReplaceAll(c, "-", "_")
		if prefix != "" {
			unit = prefix + "-" + unit
		}
		b.WriteString("/" + unit + ".slice")
		prefix = unit
	}
	return b.String()
}

// ParseCgroupfs turns a cgroupfs path ("/a/b", "a/b/", "/") into a Name.
func ParseCgroupfs(p string) Name {
	p = strings.Trim(path.Clean("/"+p), "/")
	if p == "" {
		return Name{}
	}
	return Name(strings.Split(p, "/"))
}
