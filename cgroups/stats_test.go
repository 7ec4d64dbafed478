package cgroups

import (
	"os"
	"path/filepath"
	"testing"
)

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestReadMemoryStatsV2(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"memory.current":  "104857600\n",
		"memory.max":      "134217728\n",
		"memory.stat":     "anon 50000000\nfile 54857600\nactive_file 20000000\ninactive_file 30000000\n",
		"memory.events":   "low 0\nhigh 0\nmax 12\noom 3\noom_kill 2\noom_group_kill 0\n",
		"memory.pressure": "some avg10=1.50 avg60=0.25 avg300=0.00 total=123456\nfull avg10=0.75 avg60=0.00 avg300=0.00 total=6543\n",
	})
	s, err := readMemoryStats(2, dir, false, "")
	if err != nil {
		t.Fatal(err)
	}
	if s.Usage != 104857600 || s.InactiveFile != 30000000 || s.Limit != 134217728 || s.OOMEvents != 3 || s.OOMKills != 2 {
		t.Errorf("got %+v", s)
	}
	if s.WorkingSet() != 104857600-30000000 {
		t.Errorf("working set %d", s.WorkingSet())
	}
	if s.Pressure == nil || s.Pressure.Some.Avg10 != 1.5 || s.Pressure.Some.Total != 123456 || s.Pressure.Full.Avg10 != 0.75 || s.Pressure.Full.Total != 6543 {
		t.Errorf("pressure %+v", s.Pressure)
	}

	writeFiles(t, dir, map[string]string{"memory.max": "max\n"})
	os.Remove(filepath.Join(dir, "memory.pressure"))
	if s, err = readMemoryStats(2, dir, false, ""); err != nil || s.Limit != 0 || s.Pressure != nil {
		t.Errorf("unlimited, no PSI: %+v %v", s, err)
	}
}

func TestReadMemoryStatsV2RootUsesMeminfo(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"memory.stat": "inactive_file 4096\n", "memory.pressure": "some avg10=0.00 avg60=0.00 avg300=0.00 total=1\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"})
	meminfo := filepath.Join(t.TempDir(), "meminfo")
	writeFiles(t, filepath.Dir(meminfo), map[string]string{"meminfo": "MemTotal:        2000 kB\nMemFree:          500 kB\nInactive(file):   100 kB\n"})
	s, err := readMemoryStats(2, dir, true, meminfo)
	if err != nil {
		t.Fatal(err)
	}
	if s.Usage != 1500*1024 || s.InactiveFile != 4096 || s.Limit != 0 {
		t.Errorf("got %+v", s)
	}
}

func TestReadMemoryStatsV1(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"memory.usage_in_bytes": "8192000\n",
		"memory.limit_in_bytes": "9223372036854771712\n",
		"memory.stat":           "cache 100\ninactive_file 7\ntotal_inactive_file 1000\n",
		"memory.oom_control":    "oom_kill_disable 0\nunder_oom 0\noom_kill 4\n",
	})
	s, err := readMemoryStats(1, dir, false, "")
	if err != nil {
		t.Fatal(err)
	}
	if s.Usage != 8192000 || s.InactiveFile != 1000 || s.Limit != 0 || s.OOMKills != 4 || s.Pressure != nil {
		t.Errorf("got %+v", s)
	}
	writeFiles(t, dir, map[string]string{"memory.limit_in_bytes": "67108864\n"})
	if s, _ = readMemoryStats(1, dir, false, ""); s.Limit != 67108864 {
		t.Errorf("limit %d", s.Limit)
	}
}

func TestReadPressureRejectsGarbage(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"p": "some avg10=x\n"})
	if _, err := ReadPressure(filepath.Join(dir, "p")); err == nil {
		t.Error("want an error for avg10=x")
	}
}

func TestWorkingSetNeverNegative(t *testing.T) {
	if ws := (MemoryStats{Usage: 10, InactiveFile: 20}).WorkingSet(); ws != 0 {
		t.Errorf("working set %d", ws)
	}
}

func TestCPUUsageReadsTheCounterOfEachVersion(t *testing.T) {
	root := t.TempDir()
	write := func(path, body string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// v1 with cpu and cpuacct mounted together, as some distributions do.
	v1 := &V1{mountpoint: root, hierarchies: []string{filepath.Join(root, "cpu,cpuacct"), filepath.Join(root, "memory")}}
	write(filepath.Join(root, "cpu,cpuacct", "kubepods", "cpuacct.usage"), "123456789\n")
	if got, err := CPUUsage(v1, "/kubepods"); err != nil || got != 123456789 {
		t.Errorf("v1: %d, %v; want 123456789", got, err)
	}
	if _, err := CPUUsage(&V1{mountpoint: root, hierarchies: []string{filepath.Join(root, "memory")}}, "/kubepods"); err == nil {
		t.Error("v1 without a cpuacct hierarchy: no error")
	}

	v2 := NewV2(filepath.Join(root, "unified"))
	write(filepath.Join(root, "unified", "kubepods", "cpu.stat"), "usage_usec 2500\nuser_usec 2000\nsystem_usec 500\n")
	if got, err := CPUUsage(v2, "/kubepods"); err != nil || got != 2500000 {
		t.Errorf("v2: %d, %v; want 2500000 ns", got, err)
	}
	write(filepath.Join(root, "unified", "empty", "cpu.stat"), "nr_periods 0\n")
	if _, err := CPUUsage(v2, "/empty"); err == nil {
		t.Error("v2 cpu.stat without usage_usec: no error")
	}
	if _, err := CPUUsage(v2, "/gone"); err == nil {
		t.Error("a missing cgroup: no error")
	}
}
