// Command memhog allocates and touches anonymous memory at a chosen rate, for
// OOM and eviction experiments. Memory is mapped outside the Go heap so the
// resident size is what was asked for, not a multiple of it.
//
//	memhog --mb 256 --rate 64 --pattern hold   reach 256 MiB at 64 MiB/s, then hold
//	memhog --mb 64 --rate 8 --pattern grow     reach 64 MiB, then keep growing at 8 MiB/s
//	memhog --rate 1 --pattern leak             grow forever in 64 KiB steps at 1 MiB/s
//	memhog --rate 0 --term-grace 30s           on SIGTERM, go on for 30 s (a server draining)
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"time"

	"golang.org/x/sys/unix"
)

const mib = 1 << 20

func main() {
	size := flag.Int("mb", 64, "MiB to reach before holding (hold) or before growing on (grow)")
	rate := flag.Float64("rate", 0, "MiB per second; 0 means as fast as possible")
	pattern := flag.String("pattern", "hold", "hold | grow | leak")
	delay := flag.Duration("start-delay", 0, "wait this long before allocating")
	report := flag.Duration("report", time.Second, "how often to print the allocated size")
	termGrace := flag.Duration("term-grace", 0, "on SIGTERM or SIGINT, keep allocating this long before exiting, as a server draining its requests does")
	flag.Parse()

	chunk := mib
	target := int64(*size) * mib
	switch *pattern {
	case "hold":
	case "grow":
	case "leak":
		chunk = 64 << 10
		target = 0
	default:
		fmt.Fprintf(os.Stderr, "memhog: --pattern %q: want hold, grow or leak\n", *pattern)
		os.Exit(2)
	}
	if *rate < 0 {
		fmt.Fprintf(os.Stderr, "memhog: --rate %v: must be >= 0\n", *rate)
		os.Exit(2)
	}

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, unix.SIGTERM, unix.SIGINT)
	go func() {
		<-stop
		if *termGrace > 0 {
			fmt.Printf("memhog: terminating in %s\n", *termGrace)
			time.Sleep(*termGrace)
		}
		os.Exit(0)
	}()

	time.Sleep(*delay)
	h := &hog{chunk: chunk}
	if target > 0 {
		h.allocateTo(target, *rate, *report)
		fmt.Printf("memhog: reached %d MiB\n", h.total/mib)
	}
	if *pattern == "hold" {
		select {}
	}
	if *rate == 0 {
		*rate = 1
	}
	h.allocateTo(-1, *rate, *report)
}

type hog struct {
	chunk int
	total int64
	held  [][]byte // keeps mappings reachable; never unmapped
}

// allocateTo maps and touches chunks until total reaches target (forever when
// target < 0), pacing to rate MiB/s when rate > 0.
func (h *hog) allocateTo(target int64, rate float64, report time.Duration) {
	start, startTotal := time.Now(), h.total
	lastReport := start
	for target < 0 || h.total < target {
		b, err := unix.Mmap(-1, 0, h.chunk, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
		if err != nil {
			fmt.Fprintf(os.Stderr, "memhog: mmap after %d MiB: %v\n", h.total/mib, err)
			os.Exit(1)
		}
		for i := 0; i < len(b); i += os.Getpagesize() {
			b[i] = 1
		}
		h.held = append(h.held, b)
		h.total += int64(h.chunk)
		if rate > 0 {
			due := start.Add(time.Duration(float64(h.total-startTotal) / (rate * mib) * float64(time.Second)))
			time.Sleep(time.Until(due))
		}
		if report > 0 && time.Since(lastReport) >= report {
			lastReport = time.Now()
			fmt.Printf("memhog: %d MiB\n", h.total/mib)
		}
	}
}
