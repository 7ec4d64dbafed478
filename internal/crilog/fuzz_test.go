package crilog

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// Log files are written by the runtime from what a container prints: the
// reader takes anything without a panic, never makes a record over the
// bound, and never hands out more content than the input held.
func FuzzReader(f *testing.F) {
	f.Add([]byte(sample))
	f.Add([]byte("2026-11-21T20:00:00Z stdout P a\n2026-11-21T20:00:00Z stderr P b\n2026-11-21T20:00:00Z stdout F c\n"))
	f.Add([]byte("2026-11-21T20:00:00Z stdout F no newline at the end"))
	f.Add([]byte("\n\n\n2026-11-21T20:00:00Z stdout\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		rd := NewReader(bytes.NewReader(b))
		total := 0
		for {
			rec, err := rd.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(rec.Content) > MaxRecordBytes {
				t.Fatalf("record of %d bytes", len(rec.Content))
			}
			if rec.Stream != "stdout" && rec.Stream != "stderr" {
				t.Fatalf("stream %q", rec.Stream)
			}
			total += len(rec.Content)
		}
		if total > len(b) {
			t.Fatalf("%d content bytes out of %d input bytes", total, len(b))
		}
		var out bytes.Buffer
		if err := ReadTail(bytes.NewReader(b), 3, 64, &out); err != nil {
			t.Fatal(err)
		}
		if out.Len() > 64 {
			t.Fatalf("tail wrote %d bytes, limit 64", out.Len())
		}
	})
}

func FuzzParseLine(f *testing.F) {
	f.Add([]byte("2026-11-21T20:00:00.000000001Z stdout F first"))
	f.Add([]byte("2026-11-21T20:00:00Z stderr P "))
	f.Add([]byte("x y z"))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, stream, _, content, err := ParseLine(b)
		if err != nil {
			return
		}
		if stream != "stdout" && stream != "stderr" || len(content) > len(b) {
			t.Fatalf("stream %q content %d of %d", stream, len(content), len(b))
		}
	})
}
