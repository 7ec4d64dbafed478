package mounts

import (
	"reflect"
	"strings"
	"testing"
)

const sample = `22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
100 22 0:50 / /var/lib/nodeagent/pods/u1/volumes/kubernetes.io~empty-dir/cache rw shared:60 - tmpfs tmpfs rw
101 22 8:1 /var/lib/nodeagent/pods/u1/volumes/kubernetes.io~empty-dir/data/sub /var/lib/nodeagent/pods/u1/volume-subpaths/data/app/0 rw shared:1 - ext4 /dev/sda1 rw
102 22 0:51 / /var/lib/nodeagent/pods/u1/volumes/kubernetes.io~empty-dir/cache/deeper rw - tmpfs tmpfs rw
103 22 0:52 / /var/lib/nodeagent/pods/u10/volumes/x rw - tmpfs tmpfs rw
104 22 0:53 / /var/lib/nodeagent/pods/u1/with\040space rw - tmpfs tmpfs rw
105 22 0:50 / /var/lib/nodeagent/pods/u1 rw - tmpfs tmpfs rw
`

func TestUnderListsMountsBelowDeepestFirst(t *testing.T) {
	got, err := under(strings.NewReader(sample), "/var/lib/nodeagent/pods/u1")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"/var/lib/nodeagent/pods/u1/volumes/kubernetes.io~empty-dir/cache/deeper",
		"/var/lib/nodeagent/pods/u1/volume-subpaths/data/app/0",
		"/var/lib/nodeagent/pods/u1/volumes/kubernetes.io~empty-dir/cache",
		"/var/lib/nodeagent/pods/u1/with space",
	}
	// Not u10 (a prefix, not a parent), not u1 itself.
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got\n%q\nwant\n%q", got, want)
	}
}
