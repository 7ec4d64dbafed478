package residency

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	clocktesting "k8s.io/utils/clock/testing"
)

const maps = `00400000-01da8000 r-xp 00000000 fe:00 10010927                           /usr/bin/nodeagent
01da8000-03b0c000 r--p 019a8000 fe:00 10010927                           /usr/bin/nodeagent
03b0c000-03bb9000 rw-p 0370c000 fe:00 10010927                           /usr/bin/nodeagent
03bb9000-03c00000 rw-p 00000000 00:00 0
7f0000000000-7f0000001000 r--p 00000000 fe:00 10010928                   /usr/lib/other.so
7f0000002000-7f0000003000 r--p 00000000 fe:01 10010927                   /mnt/same-inode-other-device
7f0000004000-7f0000005000 r-xp 00000000 fe:00 10010927                   /usr/bin/nodeagent (deleted)
`

func TestParseMapsKeepsTheBinarysReadOnlyMappings(t *testing.T) {
	spans, err := parseMaps(strings.NewReader(maps), unix.Mkdev(0xfe, 0), 10010927)
	if err != nil {
		t.Fatal(err)
	}
	want := []Span{{0x400000, 0x1da8000}, {0x1da8000, 0x3b0c000}, {0x7f0000004000, 0x7f0000005000}}
	if len(spans) != len(want) {
		t.Fatalf("spans %x, want %x", spans, want)
	}
	for i := range want {
		if spans[i] != want[i] {
			t.Errorf("span %d = %x, want %x (the writable segment, other files and other devices are left out)", i, spans[i], want[i])
		}
	}
}

func TestParseMapsRefusesABadRange(t *testing.T) {
	_, err := parseMaps(strings.NewReader("02000000-01000000 r-xp 00000000 fe:00 7 /bin/x\n"), unix.Mkdev(0xfe, 0), 7)
	if err == nil {
		t.Fatal("an end before the start was accepted")
	}
}

// The test binary's own code: after Release its file pages are no longer
// resident, and running on maps them back.
func TestReleaseDropsTheBinarysResidentPages(t *testing.T) {
	spans, err := ReadOnlySpans()
	if err != nil || len(spans) == 0 {
		t.Fatalf("spans %v, err %v", spans, err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat("/proc/self/exe", &st); err != nil {
		t.Fatal(err)
	}
	before := binaryResident(t, st.Ino)
	if err := Release(spans); err != nil {
		t.Fatal(err)
	}
	after := binaryResident(t, st.Ino)
	// What the next instructions fault back in is a few 64 KiB windows.
	if before < 1<<20 || after > before/2 {
		t.Fatalf("the binary's resident pages went from %d to %d KiB; want them at least halved", before>>10, after>>10)
	}
}

// binaryResident sums Rss over the mappings of inode ino in smaps.
func binaryResident(t *testing.T, ino uint64) int64 {
	b, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	mine := false
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) >= 5 && strings.Contains(f[0], "-") && !strings.HasSuffix(f[0], ":") {
			mine = f[4] == strconv.FormatUint(ino, 10)
			continue
		}
		if mine && len(f) == 3 && f[0] == "Rss:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			sum += kb << 10
		}
	}
	return sum
}

func TestReleaserWaitsForQuietAfterWork(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Unix(0, 0))
	calls := 0
	r := NewReleaser(clk, 10*time.Second, func() error { calls++; return nil })
	step := func(want bool) {
		t.Helper()
		did, err := r.Step()
		if err != nil || did != want {
			t.Fatalf("step at %s: released %v (err %v), want %v", clk.Now().Format(time.TimeOnly), did, err, want)
		}
	}
	step(false) // start-up is work: not yet quiet
	clk.SetTime(clk.Now().Add(10 * time.Second))
	step(true) // quiet after start-up
	clk.SetTime(clk.Now().Add(time.Minute))
	step(false) // nothing happened since
	r.Busy()
	clk.SetTime(clk.Now().Add(9 * time.Second))
	step(false)
	r.Busy() // the burst goes on
	clk.SetTime(clk.Now().Add(9 * time.Second))
	step(false)
	clk.SetTime(clk.Now().Add(time.Second))
	step(true)
	if calls != 2 {
		t.Fatalf("release called %d times, want 2", calls)
	}
}

func TestReleaserReportsTheReleasesError(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Unix(0, 0))
	r := NewReleaser(clk, 0, func() error { return errors.New("madvise: EINVAL") })
	if did, err := r.Step(); !did || err == nil {
		t.Fatalf("released %v, err %v; want the error", did, err)
	}
}
