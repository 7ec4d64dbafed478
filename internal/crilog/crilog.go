// Package crilog reads container logs in the CRI format the runtime writes:
// one line per record, "<RFC3339Nano time> <stdout|stderr> <F|P> <content>",
// where P marks a partial line continued by the next record.
//
// A container controls what it logs, so every read is bounded: a line of
// the file is read in chunks, and a record joined from partials is handed
// out in pieces of at most MaxRecordBytes (Continued set on all but the
// last). Memory stays flat whatever the container wrote.
package crilog

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"time"
)

// MaxRecordBytes is the most content one Record holds. containerd splits
// lines at 16 KiB (max_container_log_line_size), so whole lines are longer
// only when a container writes that much without a newline.
const MaxRecordBytes = 1 << 20

// chunkBytes is how much of a file line is read at once.
const chunkBytes = 64 << 10

// Record is one log line, reassembled from its partial records.
type Record struct {
	Time    time.Time
	Stream  string // stdout or stderr
	Content []byte // without the trailing newline
	// Continued is true for a piece of a line longer than MaxRecordBytes:
	// the next record of the stream carries on the same line.
	Continued bool
	// Unterminated is true for a line the container never ended with a
	// newline (a partial still open at the end of the log).
	Unterminated bool
}

// Ends reports whether the record ends its line: a printer writes a
// newline after it.
func (r Record) Ends() bool { return !r.Continued && !r.Unterminated }

// ParseLine splits one CRI log record. partial is true for a P record.
func ParseLine(line []byte) (t time.Time, stream string, partial bool, content []byte, err error) {
	fields := bytes.SplitN(line, []byte(" "), 4)
	if len(fields) < 3 {
		return t, "", false, nil, fmt.Errorf("not a CRI log record: %q", truncate(line))
	}
	if t, err = time.Parse(time.RFC3339Nano, string(fields[0])); err != nil {
		return t, "", false, nil, fmt.Errorf("bad time in CRI log record: %w", err)
	}
	stream = string(fields[1])
	if stream != "stdout" && stream != "stderr" {
		return t, "", false, nil, fmt.Errorf("bad stream %q in CRI log record", truncate(fields[1]))
	}
	switch string(fields[2]) {
	case "P":
		partial = true
	case "F":
	default:
		return t, "", false, nil, errors.New("bad tag in CRI log record")
	}
	if len(fields) == 4 {
		content = fields[3]
	}
	return t, stream, partial, content, nil
}

func truncate(b []byte) []byte {
	if len(b) > 64 {
		return b[:64]
	}
	return b
}

// Reader yields whole records from a CRI log stream, with bounded memory.
type Reader struct {
	r       *bufio.Reader
	pending map[string]*Record // partial lines per stream
	ready   []Record
	max     int

	// The file line being read, when it is longer than one chunk.
	line    *Record
	partial bool // the line is a P record
	more    bool // the line goes on
	skip    bool // the line is malformed: its chunks are dropped
}

// NewReader reads records from r.
func NewReader(r io.Reader) *Reader {
	return &Reader{r: bufio.NewReaderSize(r, chunkBytes), pending: map[string]*Record{}, max: MaxRecordBytes}
}

// Next returns the next record; io.EOF at the end. Malformed lines are
// skipped. A partial line still open at the end is returned as is,
// marked Unterminated.
func (r *Reader) Next() (Record, error) {
	for len(r.ready) == 0 {
		err := r.step()
		if errors.Is(err, io.EOF) {
			r.endLine()
			for _, stream := range []string{"stdout", "stderr"} {
				if rec := r.pending[stream]; rec != nil {
					delete(r.pending, stream)
					rec.Unterminated = true
					r.ready = append(r.ready, *rec)
				}
			}
			if len(r.ready) == 0 {
				return Record{}, io.EOF
			}
			break
		}
		if err != nil {
			return Record{}, err
		}
	}
	rec := r.ready[0]
	r.ready = r.ready[1:]
	return rec, nil
}

// step reads one chunk: the start of a file line (its header, into the
// pending record of its stream) or the next part of a long one. A
// finished record, or a full piece of one, goes to ready.
func (r *Reader) step() error {
	chunk, more, err := r.chunk()
	if err != nil {
		return err
	}
	if r.more { // the line read before goes on
		r.more = more
		if !r.skip {
			r.add(r.line, chunk)
		}
		if !more {
			r.endLine()
		}
		return nil
	}
	t, stream, partial, content, perr := ParseLine(chunk)
	r.more, r.skip = more, perr != nil
	if r.skip {
		return nil
	}
	rec := r.pending[stream]
	if rec == nil {
		rec = &Record{Time: t, Stream: stream}
		r.pending[stream] = rec
	}
	r.line, r.partial = rec, partial
	r.add(rec, content)
	if !more {
		r.endLine()
	}
	return nil
}

// endLine closes the file line read: an F record is complete.
func (r *Reader) endLine() {
	rec := r.line
	r.line, r.more, r.skip = nil, false, false
	if rec == nil || r.partial {
		return
	}
	delete(r.pending, rec.Stream)
	r.ready = append(r.ready, *rec)
}

// chunk reads up to the next newline or a buffer's worth; more is true
// when the line goes on. The chunk is only valid until the next read.
func (r *Reader) chunk() (chunk []byte, more bool, err error) {
	chunk, err = r.r.ReadSlice('\n')
	switch {
	case err == nil:
		return chunk[:len(chunk)-1], false, nil
	case errors.Is(err, bufio.ErrBufferFull):
		return chunk, true, nil
	case errors.Is(err, io.EOF) && len(chunk) > 0:
		return chunk, false, nil // a last line without its newline yet
	}
	return nil, false, err
}

// add appends content to rec, handing out full pieces as they fill.
func (r *Reader) add(rec *Record, content []byte) {
	for len(rec.Content)+len(content) > r.max {
		room := r.max - len(rec.Content)
		piece := *rec
		piece.Content = append(rec.Content, content[:room]...)
		piece.Continued = true
		r.ready = append(r.ready, piece)
		rec.Content = nil
		content = content[room:]
	}
	rec.Content = append(rec.Content, content...)
}

// ReadTail writes the content of the last lines of the log in f (the
// kubelet's TailLines, counting the file's lines) to w, a newline after
// each line that ends, and stops after limit bytes (the kubelet's
// LimitBytes; < 0: no limit). It reads no more of f than those lines.
func ReadTail(f io.ReadSeeker, lines int, limit int64, w io.Writer) error {
	if limit == 0 {
		return nil
	}
	from, err := TailOffset(f, lines)
	if err != nil {
		return err
	}
	if _, err := f.Seek(from, io.SeekStart); err != nil {
		return err
	}
	out := &recordWriter{w: w, o: StreamOptions{LimitBytes: max(limit, 0)}, left: limit}
	return out.copy(f)
}

// TailOffset is where the last n lines of the file start (0 when it has
// fewer, or n < 0), found by reading backwards in blocks: the kubelet's
// tail, which counts the file's lines (partial records each count).
func TailOffset(f io.ReadSeeker, n int) (int64, error) {
	size, err := f.Seek(0, io.SeekEnd)
	switch {
	case err != nil || n < 0:
		return 0, err
	case n == 0:
		return size, nil
	}
	const block = 32 << 10
	buf := make([]byte, block)
	newlines := 0
	end := size
	for end > 0 {
		start := max(end-block, 0)
		chunk := buf[:end-start]
		if _, err := f.Seek(start, io.SeekStart); err != nil {
			return 0, err
		}
		if _, err := io.ReadFull(f, chunk); err != nil {
			return 0, err
		}
		for i := len(chunk) - 1; i >= 0; i-- {
			if chunk[i] != '\n' || start+int64(i) == size-1 {
				continue // the file's final newline ends the last line
			}
			if newlines++; newlines == n {
				return start + int64(i) + 1, nil
			}
		}
		end = start
	}
	return 0, nil
}
