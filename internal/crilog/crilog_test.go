package crilog

import (
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

func TestReaderJoinsPartialsAndSkipsGarbage(t *testing.T) {
	recs, err := Tail(strings.NewReader(sample), -1)
	if err != nil {
		t.Fatal(err)
	}
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
	last2, _ := Tail(strings.NewReader(sample), 2)
	if len(last2) != 2 || string(last2[1].Content) != "last line" {
		t.Errorf("tail 2: %+v", last2)
	}
}

func TestParseLineErrors(t *testing.T) {
	for _, bad := range []string{"", "x y", "2026-11-21T20:00:00Z stdin F x", "2026-11-21T20:00:00Z stdout X x", "notatime stdout F x"} {
		if _, _, _, _, err := ParseLine([]byte(bad)); err == nil {
			t.Errorf("%q: want an error", bad)
		}
	}
}
