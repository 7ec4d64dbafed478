package crilog

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

const sample = `2026-11-21T20:00:00.000000001Z stdout F first
2026-11-21T20:00:01.5Z stderr P par
garbage line
2026-11-21T20:00:01.6Z stderr F tial
2026-11-21T20:00:02Z stdout F 
2026-11-21T20:00:03Z stdout F last line
`

func all(t *testing.T, r io.Reader) []Record {
	t.Helper()
	var out []Record
	rd := NewReader(r)
	for {
		rec, err := rd.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, rec)
	}
}

func TestReaderJoinsPartialsAndSkipsGarbage(t *testing.T) {
	recs := all(t, strings.NewReader(sample))
	var got []string
	for _, r := range recs {
		got = append(got, r.Stream+":"+string(r.Content))
	}
	want := "stdout:first|stderr:partial|stdout:|stdout:last line"
	if strings.Join(got, "|") != want {
		t.Errorf("got %q, want %q", strings.Join(got, "|"), want)
	}
	if recs[0].Time.Nanosecond() != 1 {
		t.Errorf("time %v", recs[0].Time)
	}
	open := all(t, strings.NewReader("2026-11-21T20:00:00Z stdout P DONE\n"))
	if len(open) != 1 || string(open[0].Content) != "DONE" || !open[0].Unterminated || open[0].Ends() {
		t.Errorf("a partial open at the end: %+v", open)
	}
}

func TestParseLineErrors(t *testing.T) {
	for _, bad := range []string{"", "x y", "2026-11-21T20:00:00Z stdin F x", "2026-11-21T20:00:00Z stdout X x", "notatime stdout F x"} {
		if _, _, _, _, err := ParseLine([]byte(bad)); err == nil {
			t.Errorf("%q: want an error", bad)
		}
	}
}

// partials is a log of n partial records of size bytes each, never ended:
// what containerd writes for a container that logs without a newline.
type partials struct {
	line []byte
	left int
	cur  []byte
}

func newPartials(n, size int) *partials {
	return &partials{line: []byte("2026-11-21T20:00:00Z stdout P " + strings.Repeat("x", size) + "\n"), left: n}
}

func (p *partials) Read(b []byte) (int, error) {
	if len(p.cur) == 0 {
		if p.left == 0 {
			return 0, io.EOF
		}
		p.left--
		p.cur = p.line
	}
	n := copy(b, p.cur)
	p.cur = p.cur[n:]
	return n, nil
}

// oneLine is a single file line of size bytes of content, no newline.
type oneLine struct{ head, left int }

func (o *oneLine) Read(b []byte) (int, error) {
	const head = "2026-11-21T20:00:00Z stdout F "
	n := 0
	for n < len(b) && o.head < len(head) {
		b[n] = head[o.head]
		n, o.head = n+1, o.head+1
	}
	for n < len(b) && o.left > 0 {
		b[n] = 'y'
		n, o.left = n+1, o.left-1
	}
	if n == 0 {
		return 0, io.EOF
	}
	return n, nil
}

// The audit fed the reader 256 MiB without a newline: it kept 255 MiB and
// allocated 1.5 GiB. Every byte must still come out, in bounded pieces,
// with the heap flat.
func TestReaderMemoryStaysFlatOnAHugeUnterminatedLine(t *testing.T) {
	const total = 256 << 20
	for name, r := range map[string]io.Reader{
		"16 KiB partial records": newPartials(total/(16<<10), 16<<10),
		"one 256 MiB file line":  &oneLine{left: total},
	} {
		t.Run(name, func(t *testing.T) {
			runtime.GC()
			var ms runtime.MemStats
			var peak uint64
			rd := NewReader(r)
			got, pieces := 0, 0
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
				got += len(rec.Content)
				pieces++
				if pieces%16 == 0 { // what the reader keeps alive, not garbage awaiting the GC
					runtime.GC()
					runtime.ReadMemStats(&ms)
					peak = max(peak, ms.HeapAlloc)
				}
			}
			if got != total {
				t.Errorf("read %d content bytes, want %d", got, total)
			}
			if pieces < total/MaxRecordBytes {
				t.Errorf("%d pieces for %d bytes", pieces, total)
			}
			if peak > 16<<20 {
				t.Errorf("live heap peaked at %d MiB reading 256 MiB: want it flat (a few MiB)", peak>>20)
			}
		})
	}
}

func writeLog(t *testing.T, content string) *os.File {
	t.Helper()
	p := filepath.Join(t.TempDir(), "0.log")
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func TestTailOffsetCountsFileLines(t *testing.T) {
	content := "a\nbb\nccc\n"
	f := writeLog(t, content)
	for n, want := range map[int]string{-1: content, 0: "", 1: "ccc\n", 2: "bb\nccc\n", 3: content, 10: content} {
		off, err := TailOffset(f, n)
		if err != nil {
			t.Fatal(err)
		}
		if got := content[off:]; got != want {
			t.Errorf("tail %d: %q, want %q", n, got, want)
		}
	}
	open := "a\nb"
	f = writeLog(t, open)
	if off, _ := TailOffset(f, 1); open[off:] != "b" {
		t.Errorf("tail 1 of a file mid-write: %q", open[off:])
	}
}

// The termination message's fallback: the last 80 lines of the file, the
// first 2048 bytes of them, read from the end.
func TestReadTailIsBoundedByLinesAndBytes(t *testing.T) {
	var b strings.Builder
	for i := 0; i < 100; i++ {
		b.WriteString("2026-11-21T20:00:00Z stdout F line\n")
	}
	b.WriteString("2026-11-21T20:00:00Z stderr P DO\n2026-11-21T20:00:00Z stderr P NE\n")
	var out bytes.Buffer
	if err := ReadTail(writeLog(t, b.String()), 3, -1, &out); err != nil {
		t.Fatal(err)
	}
	if out.String() != "line\nDONE" {
		t.Errorf("last 3 lines: %q", out.String())
	}
	out.Reset()
	ReadTail(writeLog(t, b.String()), 80, 12, &out)
	if out.String() != "line\nline\nli" {
		t.Errorf("80 lines cut to 12 bytes: %q", out.String())
	}

	// 256 MiB of partials: only the tail is read.
	p := filepath.Join(t.TempDir(), "big.log")
	f, _ := os.Create(p)
	io.Copy(f, newPartials((256<<20)/(16<<10), 16<<10))
	f.Close()
	big, _ := os.Open(p)
	defer big.Close()
	out.Reset()
	if err := ReadTail(big, 80, 2048, &out); err != nil || out.Len() != 2048 {
		t.Errorf("tail of 256 MiB: %d bytes, %v", out.Len(), err)
	}
	if pos, _ := big.Seek(0, io.SeekCurrent); pos < (256<<20)-(81*(16<<10+64)) {
		t.Errorf("read from offset %d of a 256 MiB log: want only its last 80 lines", pos)
	}
}
