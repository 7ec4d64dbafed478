package main

import (
	"testing"
	"time"
)

func TestRender(t *testing.T) {
	now := time.Date(2026, 11, 24, 10, 5, 7, 123456789, time.UTC)
	for format, want := range map[string]string{
		"%3t":       "10:05:07.123",
		"%t":        "10:05:07",
		`[%6t]\t%%`: "[10:05:07.123456]\t%",
	} {
		p, err := parse(format)
		if err != nil {
			t.Fatalf("%q: %v", format, err)
		}
		if got := render(p, now); got != want {
			t.Errorf("%q: %q, want %q", format, got, want)
		}
	}
	for _, bad := range []string{"%c", "%3x", "%"} {
		if _, err := parse(bad); err == nil {
			t.Errorf("%q: no error for a conversion the stand-in lacks", bad)
		}
	}
}

func TestArgs(t *testing.T) {
	for _, tc := range []struct {
		argv  []string
		delay int
	}{{[]string{"-d0", "%t"}, 0}, {[]string{"-d", "250", "%t"}, 250}, {[]string{"%t"}, 1000}} {
		d, f, err := args(tc.argv)
		if err != nil || d != tc.delay || f != "%t" {
			t.Errorf("%q: %d %q %v", tc.argv, d, f, err)
		}
	}
	for _, bad := range [][]string{{"-dx", "%t"}, {"-d"}, {}, {"%t", "extra"}} {
		if _, _, err := args(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
