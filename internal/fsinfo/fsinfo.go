// Package fsinfo reads a filesystem's size and room, the one statfs(2)
// reading that eviction (nodefs/imagefs signals), image GC and the
// Summary API share.
package fsinfo

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// Usage is a filesystem's size and room in bytes and inodes. Available is
// what unprivileged writers may still use (f_bavail), as the kubelet's
// nodefs.available is; Used counts the blocks the root reserve holds too.
type Usage struct {
	Capacity, Available, Used uint64
	Inodes, InodesFree        uint64
}

// Stat reads the filesystem that holds path.
func Stat(path string) (Usage, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return Usage{}, fmt.Errorf("statfs %s: %w", path, err)
	}
	bsize := uint64(st.Bsize)
	return Usage{
		Capacity: st.Blocks * bsize, Available: st.Bavail * bsize, Used: (st.Blocks - st.Bfree) * bsize,
		Inodes: st.Files, InodesFree: st.Ffree,
	}, nil
}
