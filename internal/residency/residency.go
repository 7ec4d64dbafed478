// Package residency gives back the pages of the agent's own binary that
// start-up or a burst of pod work mapped and the steady loops do not use.
//
// For a cached file the kernel maps the 64 KiB around each page fault
// (fault_around_bytes), so package initialisation, which touches a few bytes
// in hundreds of places of an 80 MB binary, leaves about half of the
// binary's code and function tables in the resident set for good. Dropping
// the mappings of the read-only segments (MADV_DONTNEED) leaves the pages in
// the page cache, clean and shared: what runs next maps them again with a
// minor fault, and the resident set becomes what the agent actually runs.
package residency

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Span is one mapping of the binary, [Start, End).
type Span struct{ Start, End uintptr }

// ReadOnlySpans are the mappings of the running executable that nothing
// can write: its code and read-only data. The writable segment is left
// out: its written pages are the process's own and dropping them would
// lose them.
func ReadOnlySpans() ([]Span, error) {
	var st syscall.Stat_t
	if err := syscall.Stat("/proc/self/exe", &st); err != nil {
		return nil, fmt.Errorf("stat /proc/self/exe: %w", err)
	}
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return parseMaps(f, st.Dev, st.Ino)
}

// parseMaps reads /proc/PID/maps and returns the read-only mappings of the
// file (dev, ino). The file is matched by device and inode, not path, so a
// binary replaced on disk while running (" (deleted)") is still found.
func parseMaps(r io.Reader, dev, ino uint64) ([]Span, error) {
	var spans []Span
	s := bufio.NewScanner(r)
	for s.Scan() {
		// start-end perms offset major:minor inode [path]
		f := strings.Fields(s.Text())
		if len(f) < 5 || strings.Contains(f[1], "w") {
			continue
		}
		if i, err := strconv.ParseUint(f[4], 10, 64); err != nil || i != ino {
			continue
		}
		ma, mi, err := hexPair(f[3], ":")
		if err != nil || unix.Mkdev(uint32(ma), uint32(mi)) != dev {
			continue
		}
		start, end, err := hexPair(f[0], "-")
		if err != nil || end <= start {
			return nil, fmt.Errorf("maps: bad range %q", f[0])
		}
		spans = append(spans, Span{uintptr(start), uintptr(end)})
	}
	return spans, s.Err()
}

// hexPair parses "a<sep>b", both hexadecimal.
func hexPair(s, sep string) (a, b uint64, err error) {
	x, y, ok := strings.Cut(s, sep)
	if !ok {
		return 0, 0, fmt.Errorf("no %q in %q", sep, s)
	}
	if a, err = strconv.ParseUint(x, 16, 64); err == nil {
		b, err = strconv.ParseUint(y, 16, 64)
	}
	return a, b, err
}

// Release drops the process's mappings of spans' pages. The spans must be
// read-only file mappings (ReadOnlySpans): for those the call changes what
// is resident, never what the memory holds.
func Release(spans []Span) error {
	for _, sp := range spans {
		if _, _, e := unix.Syscall(unix.SYS_MADVISE, sp.Start, sp.End-sp.Start, unix.MADV_DONTNEED); e != 0 {
			return fmt.Errorf("madvise %#x-%#x: %w", sp.Start, sp.End, e)
		}
	}
	return nil
}

// FileResident is the process's resident file-backed memory in bytes
// (RssFile of /proc/self/status), 0 when unreadable.
func FileResident() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "RssFile:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}
