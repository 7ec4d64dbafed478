//go:build integration

package cgroups

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"nodeagent/internal/testhog"
)

func TestMain(m *testing.M) {
	testhog.Main()
	os.Exit(m.Run())
}

// TestMemoryStatsLive runs against the host's real cgroup hierarchy (v1
// on the build hosts, v2 in the VM lane; `make integration` runs it): a 32 MiB cgroup, a process that allocates past
// it, and the readings the kubelet's signals are built from.
func TestMemoryStatsLive(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("needs root to create cgroups (make test runs as root)")
	}
	m, err := NewManager("cgroupfs")
	if err != nil {
		t.Fatal(err)
	}
	name := Name{"nodeagent-stats-test-" + strconv.Itoa(os.Getpid())}
	limit := int64(32 << 20)
	if err := m.Set(name, &ResourceConfig{Memory: &limit}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := m.Remove(name); err != nil {
			t.Error(err)
		}
	})

	// On v1 the memory hierarchy is enough: the limit lives there.
	hog := testhog.Start(t, filepath.Join(m.Path(name), "cgroup.procs"))
	cmd := hog.Cmd

	s, err := ReadMemoryStats(m, name)
	if err != nil {
		t.Fatal(err)
	}
	if s.Limit != uint64(limit) || s.OOMKills != 0 {
		t.Errorf("before allocating: limit %d oom kills %d, want %d and 0", s.Limit, s.OOMKills, limit)
	}
	cad, err := NewCadvisor()
	if err != nil {
		t.Fatal(err)
	}
	cadName := CadvisorName(m, m.Path(name))
	// cadvisor's view of the same cgroup (/metrics/cadvisor): the open-files
	// limit of its process, which the raw handler reads for the root only.
	// The hog's limit from the kernel, read once its runtime has raised it.
	var nofile unix.Rlimit
	if err := unix.Prlimit(cmd.Process.Pid, unix.RLIMIT_NOFILE, nil, &nofile); err != nil {
		t.Fatal(err)
	}
	_, st, err := cad.Info(cadName)
	if err != nil {
		t.Fatal(err)
	}
	if u := st.Processes.Ulimits; len(u) != 1 || u[0].Name != "max_open_files" || u[0].SoftLimit != int64(nofile.Cur) {
		t.Errorf("cadvisor ulimits %+v, want max_open_files soft %d (the hog's)", u, nofile.Cur)
	}
	if st.OOMEvents != 0 {
		t.Errorf("cadvisor oom events %d before allocating, want 0", st.OOMEvents)
	}
	hog.Go()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("the hog was not OOM-killed within 60s")
	}
	if err == nil {
		t.Fatal("the hog exited cleanly, want a SIGKILL from the OOM killer")
	}
	s, err = ReadMemoryStats(m, name)
	if err != nil {
		t.Fatal(err)
	}
	if s.OOMKills < 1 {
		t.Errorf("oom kills = %d after the hog died (%v), want >= 1", s.OOMKills, err)
	}
	if _, st, err := cad.Info(cadName); err != nil || st.OOMEvents != s.OOMKills {
		t.Errorf("cadvisor oom events after the kill: %v (err %v), want %d", st, err, s.OOMKills)
	}
	if m.Version() == 2 {
		if s.OOMEvents < 1 {
			t.Errorf("memory.events oom = %d, want >= 1", s.OOMEvents)
		}
		if s.Pressure == nil {
			t.Error("no memory.pressure on cgroup v2 (PSI)")
		}
	}
	t.Logf("cgroup v%d: %+v", m.Version(), s)

	root, err := ReadMemoryStats(m, Name{})
	if err != nil {
		t.Fatal(err)
	}
	if root.Usage == 0 || root.WorkingSet() == 0 || root.WorkingSet() > root.Usage {
		t.Errorf("root cgroup: usage %d working set %d", root.Usage, root.WorkingSet())
	}
	t.Logf("root: usage %d MiB, working set %d MiB, inactive_file %d MiB", root.Usage>>20, root.WorkingSet()>>20, root.InactiveFile>>20)
}

// TestCPUUsageIsCadvisorsCounterLive: the cheap CPU reading the stats
// sampler keeps rates with is the counter cadvisor reports, on the node
// and on a pod-like cgroup.
func TestCPUUsageIsCadvisorsCounterLive(t *testing.T) {
	m, err := NewManager("cgroupfs")
	if err != nil {
		t.Fatal(err)
	}
	name := Name{"nodeagent-cpu-test-" + strconv.Itoa(os.Getpid())}
	if err := m.Set(name, &ResourceConfig{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := m.Remove(name); err != nil {
			t.Error(err)
		}
	})
	cad, err := NewCadvisor()
	if err != nil {
		t.Fatal(err)
	}
	for _, cg := range []string{"/", CadvisorName(m, m.Path(name))} {
		before, err := CPUUsage(m, cg)
		if err != nil {
			t.Fatal(err)
		}
		st, err := cad.Stats(cg)
		if err != nil {
			t.Fatal(err)
		}
		after, err := CPUUsage(m, cg)
		if err != nil {
			t.Fatal(err)
		}
		if got := st.Cpu.Usage.Total; got < before || got > after {
			t.Errorf("%s: cadvisor's CPU total %d is not between the cheap readings %d and %d", cg, got, before, after)
		}
		if cg == "/" && before == 0 {
			t.Error("the node's CPU counter reads 0")
		}
	}
}
