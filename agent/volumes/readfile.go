package volumes

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// ReadBeneath reads the regular file at path inside the volume at dir
// (fileKeyRef's env files), at most limit bytes. The container wrote the
// volume, so the path is resolved by the kernel beneath it, as a subPath
// is: a symlink out of the volume is an error, not a host file.
func ReadBeneath(dir, path string, limit int64) ([]byte, error) {
	for _, elem := range strings.Split(path, "/") {
		if elem == ".." {
			return nil, fmt.Errorf("path %q: must not contain '..'", path)
		}
	}
	root, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open volume %s: %w", dir, err)
	}
	defer unix.Close(root)
	fd, err := resolveBeneath(root, strings.TrimLeft(path, "/"))
	if err != nil {
		if errors.Is(err, unix.EXDEV) || errors.Is(err, unix.ELOOP) {
			return nil, fmt.Errorf("path %q leads out of the volume (through a symbolic link)", path)
		}
		return nil, fmt.Errorf("open %q in the volume: %w", path, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, fmt.Errorf("%q in the volume is not a regular file", path)
	}
	// The O_PATH descriptor is reopened for reading through /proc: the
	// file it names cannot have been swapped since it was resolved.
	f, err := os.Open(fmt.Sprintf("/proc/self/fd/%d", fd))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%q in the volume is over %d bytes", path, limit)
	}
	return data, nil
}
