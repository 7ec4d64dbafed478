package residency

import (
	"encoding/binary"
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"
	"unsafe"

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

// ReadOnlySpans finds the running binary's code: this test's own function
// lies in one of them.
func TestReadOnlySpansHoldTheBinarysCode(t *testing.T) {
	spans, err := ReadOnlySpans()
	if err != nil || len(spans) == 0 {
		t.Fatalf("spans %v, err %v", spans, err)
	}
	pc := reflect.ValueOf(TestReadOnlySpansHoldTheBinarysCode).Pointer()
	for _, s := range spans {
		if pc >= s.Start && pc < s.End {
			return
		}
	}
	t.Errorf("the test function at %x is in none of %x", pc, spans)
}

// Release unmaps the pages of a read-only file mapping: every page is
// present before (read through), none after, as the page table says
// (pagemap's present bit). Nothing else touches this mapping, unlike the
// binary's own code, which the code running after Release faults back.
func TestReleaseDropsTheMappedPages(t *testing.T) {
	const size = 8 << 20
	f, err := os.CreateTemp(t.TempDir(), "mapped")
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	data, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ, unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(data)
	sum := 0
	for i := 0; i < size; i += os.Getpagesize() {
		sum += int(data[i])
	}
	pagemap, err := os.Open("/proc/self/pagemap")
	if err != nil {
		t.Fatal(err)
	}
	defer pagemap.Close()
	span := []Span{{Start: uintptr(unsafe.Pointer(&data[0])), End: uintptr(unsafe.Pointer(&data[0])) + size}}
	before, total := present(t, pagemap, span)
	if err := Release(span); err != nil {
		t.Fatal(err)
	}
	after, _ := present(t, pagemap, span)
	if before != total || after != 0 || sum != 0 {
		t.Fatalf("%d of %d pages present before Release, %d after; want all, then none", before, total, after)
	}
}

// present counts the pages of spans mapped in this process, and all of
// them, from /proc/self/pagemap (bit 63 of each page's entry).
func present(t *testing.T, pagemap *os.File, spans []Span) (n, total int) {
	page := uintptr(os.Getpagesize())
	for _, s := range spans {
		pages := int((s.End - s.Start) / page)
		buf := make([]byte, 8*pages)
		if _, err := pagemap.ReadAt(buf, int64(s.Start/page*8)); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < pages; i++ {
			if binary.LittleEndian.Uint64(buf[8*i:])>>63 == 1 {
				n++
			}
		}
		total += pages
	}
	return n, total
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
