// Package safefile reads files that someone else may have written with a
// bound on what is read, and writes the agent's own files so that a crash
// or power loss leaves the old content or the new one, never a torn or
// empty file.
package safefile

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// TooLargeError is a file over the limit a reader set.
type TooLargeError struct {
	Size, Limit int64
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("is %d bytes, more than the %d allowed", e.Size, e.Limit)
}

// Read reads a regular file of at most limit bytes. The size is checked
// on the open file before anything is read, the open never blocks (a FIFO
// dropped in place of a file is refused, not waited on), and the read
// stops at the limit even if the file grows meanwhile.
func Read(path string, limit int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("not a regular file (%s)", st.Mode().Type())
	}
	if st.Size() > limit {
		return nil, &TooLargeError{Size: st.Size(), Limit: limit}
	}
	// Sized by the file: ReadAll's doubling would hold twice what is read.
	var buf bytes.Buffer
	buf.Grow(int(st.Size()) + 512)
	if _, err := buf.ReadFrom(io.LimitReader(f, limit+1)); err != nil {
		return nil, err
	}
	if int64(buf.Len()) > limit {
		// It grew while being read: still never more than limit+1 bytes.
		return nil, &TooLargeError{Size: int64(buf.Len()), Limit: limit}
	}
	return buf.Bytes(), nil
}

// Write replaces path with data durably: a temporary file in the same
// directory is written, fsync-ed and renamed over path, and the directory
// is fsync-ed so the rename itself survives a power loss. The temporary
// file is created exclusively and never follows a symlink; it is removed
// on failure.
func Write(path string, data []byte, perm os.FileMode) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	done := false
	defer func() {
		if !done {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err := tmp.Write(data); err != nil {
		return err
	}
	if err := tmp.Chmod(perm); err != nil {
		return err
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	done = true
	return SyncDir(dir)
}

// SyncDir fsyncs a directory, making the entries renamed or removed in it
// durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return nil
}
