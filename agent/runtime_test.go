package agent

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"nodeagent/agent/config"
	"nodeagent/cri/critest"
)

// The runtime's cgroup driver wins over the config's, as the kubelet takes
// it from RuntimeConfig; a runtime without the call leaves the config's; a
// failed call stops the agent with one line.
func TestCgroupDriverComesFromTheRuntime(t *testing.T) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg := config.Defaults() // cgroupfs
	a, err := New(&cfg, Options{NodeName: "n", Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, runtime, want string
		fail                bool
	}{
		{"runtime says systemd", "systemd", "systemd", false},
		{"runtime agrees", "cgroupfs", "cgroupfs", false},
		{"no RuntimeConfig", "", "cgroupfs", false},
		{"RuntimeConfig fails", "systemd", "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rt := critest.New()
			rt.Driver = tc.runtime
			if tc.fail {
				rt.Fail("RuntimeConfig", errors.New("runtime is restarting"))
			}
			p := &parts{rt: rt, rtStatus: &runtimeapi.StatusResponse{}}
			got, err := a.cgroupDriver(context.Background(), p)
			if tc.fail {
				if err == nil || !strings.Contains(err.Error(), "RuntimeConfig") {
					t.Errorf("want an error naming RuntimeConfig, got %q, %v", got, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("driver %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}
