package mounts

import (
	"strings"
	"testing"
)

func TestHoldingMountTakesTheMountHoldingTheDirectory(t *testing.T) {
	const info = `22 1 8:1 / / rw,relatime - ext4 /dev/sda1 rw
30 22 8:2 / /var rw shared:5 - ext4 /dev/sda2 rw
31 30 8:2 /lib/nodeagent /var/lib/nodeagent rw - ext4 /dev/sda2 rw
40 22 0:40 / /srv/a rw shared:9 - tmpfs tmpfs rw
41 40 0:40 / /srv/a rw - tmpfs tmpfs rw
50 22 0:50 / /opt/x\040y rw master:3 shared:12 - tmpfs tmpfs rw
`
	for dir, want := range map[string]bool{
		"/":                          false, // the root mount is private
		"/etc":                       false,
		"/var":                       true,
		"/var/cache":                 true,
		"/var/lib/nodeagent":         false, // a private bind over a shared parent
		"/var/lib/nodeagent/pods/u1": false,
		"/var/lib/nodeagentx":        true,  // a name prefix, not a child
		"/srv/a/b":                   false, // the mount stacked last counts
		"/opt/x y/z":                 true,
	} {
		got, _, err := holdingMount(strings.NewReader(info), dir)
		if err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		if got != want {
			t.Errorf("%s: shared %v, want %v", dir, got, want)
		}
	}
}

func TestHoldingMountNamesTheMountPoint(t *testing.T) {
	const info = "22 1 8:1 / / rw - ext4 /dev/sda1 rw\n31 22 8:2 /lib/nodeagent /var/lib/nodeagent rw shared:7 - ext4 /dev/sda2 rw\n"
	for dir, want := range map[string]string{"/var/lib/nodeagent/pods/u1": "/var/lib/nodeagent", "/var/lib/nodeagent": "/var/lib/nodeagent", "/var/lib": "/"} {
		if _, got, err := holdingMount(strings.NewReader(info), dir); err != nil || got != want {
			t.Errorf("%s: mount point %q (%v), want %q", dir, got, err, want)
		}
	}
}

func TestHoldingMountWithoutAHoldingMountIsAnError(t *testing.T) {
	if _, _, err := holdingMount(strings.NewReader("30 22 8:2 / /var rw shared:5 - ext4 /dev/sda2 rw\n"), "/etc"); err == nil {
		t.Error("no error for a directory no mount holds")
	}
}
