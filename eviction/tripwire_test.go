package eviction

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestTripwireFiresOnHighAndComesDown(t *testing.T) {
	dir := t.TempDir()
	write := func(name, v string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	read := func(name string) string {
		b, _ := os.ReadFile(filepath.Join(dir, name))
		return strings.TrimSpace(string(b))
	}
	write("memory.high", "max\n")
	write("memory.events", "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\n")
	crossed := make(chan time.Time, 4)
	w, err := NewTripwires(func(at time.Time) { crossed <- at }, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Arm(dir, 700<<20); err != nil {
		t.Fatal(err)
	}
	// The wire goes a margin above the line, so that the kernel holding
	// usage at memory.high holds it past the line.
	margin := wireMargin()
	if margin < 4<<20 {
		t.Errorf("wire margin %d, want at least 4 MiB", margin)
	}
	wire := func(line int64) string { return strconv.FormatInt(line+margin, 10) }
	if got := read("memory.high"); got != wire(700<<20) {
		t.Errorf("memory.high = %s, want %s", got, wire(700<<20))
	}
	// Another counter moving is not a crossing.
	write("memory.events", "low 0\nhigh 0\nmax 1\noom 0\noom_kill 0\n")
	select {
	case <-crossed:
		t.Fatal("fired on a max event")
	case <-time.After(200 * time.Millisecond):
	}
	write("memory.events", "low 0\nhigh 3\nmax 1\noom 0\noom_kill 0\n")
	select {
	case <-crossed:
	case <-time.After(5 * time.Second):
		t.Fatal("no crossing reported for the high counter")
	}
	// A small move keeps the wire; a large one moves it.
	w.Arm(dir, 700<<20+1000)
	if got := read("memory.high"); got != wire(700<<20) {
		t.Errorf("re-armed for a small move: %s", got)
	}
	w.Arm(dir, 600<<20)
	if got := read("memory.high"); got != wire(600<<20) {
		t.Errorf("not moved: %s, want %s", got, wire(600<<20))
	}
	// Changed behind our back: put back.
	write("memory.high", "max\n")
	w.Arm(dir, 600<<20)
	if got := read("memory.high"); got != wire(600<<20) {
		t.Errorf("not restored: %s", got)
	}
	// The kernel keeps memory.high in pages: a wire that is not a whole
	// number of pages would read back different and be re-set every time.
	line := int64(500<<20 + 1000)
	w.Arm(dir, line)
	high, err := strconv.ParseInt(read("memory.high"), 10, 64)
	if page := int64(os.Getpagesize()); err != nil || high%page != 0 || high > line+wireMargin() || high <= line+wireMargin()-page {
		t.Errorf("wire for line %d = %s, want line+%d rounded down to a page", line, read("memory.high"), wireMargin())
	}
	w.Close()
	if got := read("memory.high"); got != "max" {
		t.Errorf("memory.high after Close = %s, want max", got)
	}
}
