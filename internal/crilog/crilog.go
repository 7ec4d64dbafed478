// Package crilog reads container logs in the CRI format the runtime writes:
// one line per record, "<RFC3339Nano time> <stdout|stderr> <F|P> <content>",
// where P marks a partial line continued by the next record.
package crilog

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"time"
)

// Record is one log line, reassembled from its partial records.
type Record struct {
	Time    time.Time
	Stream  string // stdout or stderr
	Content []byte // without the trailing newline
	// Unterminated is true for a line the container never ended with a
	// newline (a partial still open at the end of the log).
	Unterminated bool
}

// ParseLine splits one CRI log record. partial is true for a P record.
func ParseLine(line []byte) (t time.Time, stream string, partial bool, content []byte, err error) {
	fields := bytes.SplitN(line, []byte(" "), 4)
	if len(fields) < 3 {
		return t, "", false, nil, fmt.Errorf("not a CRI log record: %q", line)
	}
	if t, err = time.Parse(time.RFC3339Nano, string(fields[0])); err != nil {
		return t, "", false, nil, fmt.Errorf("bad time in CRI log record: %w", err)
	}
	stream = string(fields[1])
	if stream != "stdout" && stream != "stderr" {
		return t, "", false, nil, fmt.Errorf("bad stream %q in CRI log record", stream)
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

// Reader yields whole records from a CRI log stream.
type Reader struct {
	s       *bufio.Scanner
	pending map[string]*Record // partial lines per stream
}

// NewReader reads records from r.
func NewReader(r io.Reader) *Reader {
	s := bufio.NewScanner(r)
	s.Buffer(make([]byte, 64<<10), 1<<20)
	return &Reader{s: s, pending: map[string]*Record{}}
}

// Next returns the next whole record; io.EOF at the end. Malformed lines
// are skipped. A partial line still open at the end is returned as is.
func (r *Reader) Next() (Record, error) {
	for r.s.Scan() {
		t, stream, partial, content, err := ParseLine(r.s.Bytes())
		if err != nil {
			continue
		}
		rec := r.pending[stream]
		if rec == nil {
			rec = &Record{Time: t, Stream: stream}
		}
		rec.Content = append(rec.Content, content...)
		if partial {
			r.pending[stream] = rec
			continue
		}
		delete(r.pending, stream)
		return *rec, nil
	}
	if err := r.s.Err(); err != nil {
		return Record{}, err
	}
	for stream, rec := range r.pending {
		delete(r.pending, stream)
		rec.Unterminated = true
		return *rec, nil
	}
	return Record{}, io.EOF
}

// Tail returns the last n records of r (all when n < 0).
func Tail(r io.Reader, n int) ([]Record, error) {
	var out []Record
	rd := NewReader(r)
	for {
		rec, err := rd.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, rec)
		if n >= 0 && len(out) > n {
			out = out[1:]
		}
	}
}
