package logs

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"nodeagent/cri/critest"
)

type list []*runtimeapi.ContainerStatus

func (l list) Containers() []*runtimeapi.ContainerStatus { return l }

func names(t *testing.T, dir string) []string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	sort.Strings(out)
	return out
}

func TestRotateKeepsMaxFilesAndCompressesOlderOnes(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "0.log")
	rt := critest.New()
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC))
	c := &runtimeapi.ContainerStatus{Id: "c1", State: runtimeapi.ContainerState_CONTAINER_RUNNING, LogPath: log}
	rt.PutContainer(c)
	r := NewRotator(rt, list{c}, 100, 3, clk, slog.New(slog.NewTextHandler(io.Discard, nil)))

	os.WriteFile(log, []byte(strings.Repeat("a", 50)), 0o644)
	r.RotateOnce(context.Background())
	if len(rt.Calls("ReopenContainerLog")) != 0 {
		t.Fatal("rotated a log below the size limit")
	}
	for i := 0; i < 4; i++ {
		os.WriteFile(log, []byte(strings.Repeat("b", 150)), 0o644)
		r.RotateOnce(context.Background())
		clk.Step(time.Minute)
	}
	got := names(t, dir)
	want := []string{"0.log", "0.log.20260101-100200.gz", "0.log.20260101-100300"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("files = %v, want %v (3 files: current, newest rotated plain, older gzipped)", got, want)
	}
	if n := len(rt.Calls("ReopenContainerLog")); n != 4 {
		t.Errorf("reopened %d times", n)
	}
}

func TestRotateRestoresTheLogWhenReopenFails(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "0.log")
	os.WriteFile(log, []byte(strings.Repeat("b", 150)), 0o644)
	rt := critest.New()
	rt.Fail("ReopenContainerLog", errors.New("runtime down"))
	c := &runtimeapi.ContainerStatus{Id: "c1", State: runtimeapi.ContainerState_CONTAINER_RUNNING, LogPath: log}
	rt.PutContainer(c)
	r := NewRotator(rt, list{c}, 100, 3, clocktesting.NewFakeClock(time.Unix(0, 0)), slog.New(slog.NewTextHandler(io.Discard, nil)))
	r.RotateOnce(context.Background())
	if got := names(t, dir); len(got) != 1 || got[0] != "0.log" {
		t.Errorf("files = %v: the log must be put back", got)
	}
}
