package crilog

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"syscall"
	"time"
)

// StreamOptions choose what Stream writes: the kubelet's PodLogOptions.
type StreamOptions struct {
	Tail       int       // the last lines only (the file's lines); < 0: all
	Since      time.Time // lines stamped before it are left out; zero: all
	Timestamps bool      // each line starts with its RFC 3339 time
	LimitBytes int64     // stop after this many bytes; <= 0: no limit
	Follow     bool
	// Running reports whether the container still writes to the log: a
	// follow ends once it is false and the log is read to its end. Nil:
	// follow until ctx ends.
	Running func() bool
	// Poll is how often a follow looks for new lines (default 200 ms).
	Poll time.Duration
}

// Stream writes the log at path to w as the kubelet serves container
// logs. A follow reads complete lines as the runtime writes them and goes
// on into the new file when the log is rotated (renamed away and
// reopened by the runtime). It returns when the log is read (and, with
// Follow, the container stopped), the limit is reached, w fails or ctx
// ends.
func Stream(ctx context.Context, path string, o StreamOptions, w io.Writer) error {
	f, err := openLog(path)
	if err != nil {
		return err
	}
	defer func() { f.Close() }()
	pos, err := TailOffset(f, o.Tail)
	if err != nil {
		return err
	}
	if o.Poll <= 0 {
		o.Poll = 200 * time.Millisecond
	}
	out := &recordWriter{w: w, o: o, left: o.LimitBytes}
	if !o.Follow {
		size, err := f.Seek(0, io.SeekEnd)
		if err != nil {
			return err
		}
		return out.copy(io.NewSectionReader(f, pos, size-pos))
	}
	// drain writes what is left of f past pos: a line the container
	// never ended.
	drain := func() error {
		size, err := f.Seek(0, io.SeekEnd)
		if err == nil && size > pos {
			err = out.copy(io.NewSectionReader(f, pos, size-pos))
		}
		return err
	}
	buf := make([]byte, 32<<10)
	lastCheck, running := time.Time{}, true
	for {
		end, err := lastNewline(f, pos, buf)
		if err != nil {
			return err
		}
		if end > pos {
			if err := out.copy(io.NewSectionReader(f, pos, end-pos)); err != nil || out.done() {
				return err
			}
			pos = end
			continue
		}
		// No complete line past pos. A rotated log is finished: the rest
		// of it goes out, and the runtime's new file follows.
		if rotated(path, f) {
			next, err := openLog(path)
			if err == nil {
				if err := drain(); err != nil || out.done() {
					next.Close()
					return err
				}
				f.Close()
				f, pos = next, 0
				continue
			}
		}
		if o.Running != nil && time.Since(lastCheck) >= time.Second {
			running, lastCheck = o.Running(), time.Now()
		}
		if !running {
			return drain()
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(o.Poll):
		}
	}
}

func openLog(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
}

// rotated reports whether path now names a file other than f (a stat,
// not an open, on every poll).
func rotated(path string, f *os.File) bool {
	now, err := os.Lstat(path)
	if err != nil || !now.Mode().IsRegular() {
		return false // not reopened yet
	}
	cur, err := f.Stat()
	return err == nil && !os.SameFile(now, cur)
}

// lastNewline is the offset just past the file's last newline at or after
// pos (pos when there is none): where its complete lines end. It reads
// backwards in blocks of buf, no further than pos.
func lastNewline(f *os.File, pos int64, buf []byte) (int64, error) {
	size, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return pos, err
	}
	for end := size; end > pos; {
		start := max(end-int64(len(buf)), pos)
		chunk := buf[:end-start]
		if _, err := f.ReadAt(chunk, start); err != nil && !errors.Is(err, io.EOF) {
			return pos, err
		}
		if i := bytes.LastIndexByte(chunk, '\n'); i >= 0 {
			return start + int64(i) + 1, nil
		}
		end = start
	}
	return pos, nil
}

// recordWriter writes records with the options' filters and limit. A line
// split across reads (a partial record at the end of one, its rest in the
// next) is written as one line, stamped and filtered once.
type recordWriter struct {
	w       io.Writer
	o       StreamOptions
	left    int64 // bytes still allowed when LimitBytes > 0
	midLine bool  // the last record written did not end its line
	skipped bool  // the line in progress is filtered out
}

func (rw *recordWriter) done() bool { return rw.o.LimitBytes > 0 && rw.left <= 0 }

func (rw *recordWriter) copy(r io.Reader) error {
	rd := NewReader(r)
	for {
		rec, err := rd.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := rw.write(rec); err != nil || rw.done() {
			return err
		}
	}
}

func (rw *recordWriter) write(rec Record) error {
	continuing := rw.midLine
	rw.midLine = !rec.Ends()
	if !continuing {
		rw.skipped = !rw.o.Since.IsZero() && rec.Time.Before(rw.o.Since)
	}
	if rw.skipped {
		return nil
	}
	var line []byte
	if rw.o.Timestamps && !continuing {
		line = append(rec.Time.AppendFormat(line, time.RFC3339Nano), ' ')
	}
	line = append(line, rec.Content...)
	if rec.Ends() {
		line = append(line, '\n')
	}
	if rw.o.LimitBytes > 0 && int64(len(line)) > rw.left {
		line = line[:rw.left]
	}
	rw.left -= int64(len(line))
	_, err := rw.w.Write(line)
	return err
}
