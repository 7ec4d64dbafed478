// Command nmeter stands in for busybox's nmeter in the upstream node e2e
// suite's images: Debian's static busybox is built without it, and the
// suite reads millisecond timestamps with `nmeter -d0 '%3t' | head -n1`.
// Only the time conversion is supported:
//
//	nmeter [-d MSEC] FORMAT   print FORMAT every MSEC (default 1000; -1: once)
//
// where %t is the time of day (HH:MM:SS), %Nt adds N decimals (1-6), %%
// is a percent sign and \n, \t, \\ are escapes.
package main

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

func main() {
	delay, spec, err := args(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "nmeter:", err)
		fmt.Fprintln(os.Stderr, "usage: nmeter [-d MSEC] FORMAT")
		os.Exit(1)
	}
	format, err := parse(spec)
	if err != nil {
		fmt.Fprintln(os.Stderr, "nmeter:", err)
		os.Exit(1)
	}
	out := bufio.NewWriter(os.Stdout)
	for {
		line := render(format, time.Now())
		if _, err := out.WriteString(line + "\n"); err != nil {
			os.Exit(0)
		}
		if err := out.Flush(); err != nil {
			os.Exit(0) // the reader went away (head -n1)
		}
		if delay < 0 {
			return
		}
		time.Sleep(time.Duration(delay) * time.Millisecond)
	}
}

// args reads busybox's getopt forms: -d MSEC or -dMSEC, then FORMAT.
func args(argv []string) (delay int, format string, err error) {
	delay = 1000
	for len(argv) > 0 && strings.HasPrefix(argv[0], "-d") {
		v := strings.TrimPrefix(argv[0], "-d")
		argv = argv[1:]
		if v == "" {
			if len(argv) == 0 {
				return 0, "", fmt.Errorf("-d needs a value")
			}
			v, argv = argv[0], argv[1:]
		}
		if delay, err = strconv.Atoi(v); err != nil {
			return 0, "", fmt.Errorf("-d %q: not a number of milliseconds", v)
		}
	}
	if len(argv) != 1 {
		return 0, "", fmt.Errorf("want one FORMAT, got %d arguments", len(argv))
	}
	return delay, argv[0], nil
}

// piece is literal text, or the time with decimals digits when isTime.
type piece struct {
	text     string
	isTime   bool
	decimals int
}

func parse(f string) ([]piece, error) {
	var out []piece
	var lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			out = append(out, piece{text: lit.String()})
			lit.Reset()
		}
	}
	for i := 0; i < len(f); i++ {
		switch c := f[i]; {
		case c == '\\' && i+1 < len(f):
			i++
			switch f[i] {
			case 'n':
				lit.WriteByte('\n')
			case 't':
				lit.WriteByte('\t')
			default:
				lit.WriteByte(f[i])
			}
		case c == '%' && i+1 < len(f) && f[i+1] == '%':
			i++
			lit.WriteByte('%')
		case c == '%':
			decimals := 0
			j := i + 1
			if j < len(f) && f[j] >= '1' && f[j] <= '6' {
				decimals = int(f[j] - '0')
				j++
			}
			if j >= len(f) || f[j] != 't' {
				return nil, fmt.Errorf("unsupported conversion in %q: this stand-in prints only %%t and %%Nt", f)
			}
			flush()
			out = append(out, piece{isTime: true, decimals: decimals})
			i = j
		default:
			lit.WriteByte(c)
		}
	}
	flush()
	return out, nil
}

func render(format []piece, now time.Time) string {
	var b strings.Builder
	for _, p := range format {
		if !p.isTime {
			b.WriteString(p.text)
			continue
		}
		b.WriteString(now.Format("15:04:05"))
		if p.decimals > 0 {
			frac := fmt.Sprintf("%09d", now.Nanosecond())
			b.WriteString("." + frac[:p.decimals])
		}
	}
	return b.String()
}
