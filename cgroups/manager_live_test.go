//go:build integration

package cgroups

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestUpdateLive runs on the host's real hierarchy (v1 in `make
// integration`, v2 in the VM lane): Update rewrites an existing cgroup's
// values, and on a removed cgroup it fails with fs.ErrNotExist and leaves
// nothing behind, where Set would create the cgroup again.
func TestUpdateLive(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("needs root to create cgroups (make test runs as root)")
	}
	m, err := NewManager("cgroupfs")
	if err != nil {
		t.Fatal(err)
	}
	name := Name{"nodeagent-update-test-" + strconv.Itoa(os.Getpid())}
	limit, shares := int64(64<<20), uint64(512)
	if err := m.Set(name, &ResourceConfig{Memory: &limit, CPUShares: &shares}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Remove(name) })

	limit, shares = 32<<20, 256
	if err := m.Update(name, &ResourceConfig{Memory: &limit, CPUShares: &shares}); err != nil {
		t.Fatalf("Update of an existing cgroup: %v", err)
	}
	v, err := Inspect(m, name)
	if err != nil {
		t.Fatal(err)
	}
	wantCPU := shares
	got := v.CPUShares
	if m.Version() == 2 {
		wantCPU, got = SharesToWeight(shares), v.CPUWeight
	}
	if v.MemoryLimit != limit || got != wantCPU {
		t.Errorf("after Update: memory limit %d, cpu %d; want %d, %d", v.MemoryLimit, got, limit, wantCPU)
	}

	if err := m.Remove(name); err != nil {
		t.Fatal(err)
	}
	err = m.Update(name, &ResourceConfig{Memory: &limit})
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Update of a removed cgroup = %v, want fs.ErrNotExist", err)
	}
	if m.Exists(name) {
		t.Error("Update brought the removed cgroup back")
	}
}

// TestSystemdMemoryHighLive runs in the VM lane, where systemd is PID 1:
// memory.high set through MemoryHighSetter holds when systemd realizes
// the slice again, as it does when a slice starts below it or the
// driver updates its properties.
func TestSystemdMemoryHighLive(t *testing.T) {
	if Mode() != "v2" {
		t.Skip("the systemd driver needs cgroup v2; the host is v1 (the VM lane runs this)")
	}
	m, err := NewSystemd(DefaultMountpoint)
	if err != nil {
		t.Skipf("no systemd on the bus (the VM lane runs this): %v", err)
	}
	parent := Name{"nodeagent-high-test-" + strconv.Itoa(os.Getpid())}
	limit := int64(1 << 30)
	if err := m.Set(parent, &ResourceConfig{Memory: &limit}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Remove(parent) })
	dir := m.Path(parent)
	high := func() string {
		b, err := os.ReadFile(dir + "/memory.high")
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	set := MemoryHighSetter(m)
	if err := set(dir, 512<<20); err != nil {
		t.Fatal(err)
	}
	if got := high(); got != "536870912" {
		t.Fatalf("memory.high after the setter = %s, want 536870912", got)
	}

	child := append(parent, "child")
	childLimit := int64(64 << 20)
	if err := m.Set(child, &ResourceConfig{Memory: &childLimit}); err != nil {
		t.Fatal(err)
	}
	limit = 2 << 30
	if err := m.Update(parent, &ResourceConfig{Memory: &limit}); err != nil {
		t.Fatal(err)
	}
	if got := high(); got != "536870912" {
		t.Errorf("memory.high after a child slice and a property update = %s, want 536870912 (systemd lost it)", got)
	}
	// For the record: what a bare write becomes on the next realization.
	WriteMemoryHigh(dir, 256<<20)
	m.Update(parent, &ResourceConfig{Memory: &limit})
	t.Logf("a bare write of 268435456, after a property update, reads %s", high())

	if err := m.Remove(child); err != nil {
		t.Fatal(err)
	}
	if err := set(dir, -1); err != nil {
		t.Fatal(err)
	}
	if got := high(); got != "max" {
		t.Errorf("memory.high after setting -1 = %s, want max", got)
	}
}

// TestKillPodFreezesLive: a pod cgroup whose shell forks as fast as it
// can (pids.max bounds it) is emptied by one kill, through the real
// freezer on v1 (cgroup.kill on v2), and left thawed.
func TestKillPodFreezesLive(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("needs root to create cgroups (make test runs as root)")
	}
	m, err := NewManager("cgroupfs")
	if err != nil {
		t.Fatal(err)
	}
	tree := NewTree(m, TreeConfig{PerQOS: true, Root: Name{"nodeagent-kill-test-" + strconv.Itoa(os.Getpid())}})
	name := tree.Kubepods().Child("podlive")
	pids := int64(64)
	if err := m.Set(name, &ResourceConfig{PidsLimit: &pids}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tree.RemovePod(name); m.Remove(tree.Kubepods()); m.Remove(Name{tree.Kubepods()[0]}) })
	shell := exec.Command("sh", "-c", "read go; while :; do sleep 60 & done 2>/dev/null")
	stdin, _ := shell.StdinPipe()
	if err := shell.Start(); err != nil {
		t.Fatal(err)
	}
	go shell.Wait()
	// Into the pod cgroup in every hierarchy, as runc places a container.
	dirs, _ := filepath.Glob(filepath.Join(DefaultMountpoint, "*", name.Cgroupfs()))
	if m.Version() == 2 {
		dirs = []string{m.Path(name)}
	}
	for _, d := range dirs {
		if err := os.WriteFile(filepath.Join(d, "cgroup.procs"), []byte(strconv.Itoa(shell.Process.Pid)), 0o644); err != nil {
			t.Fatalf("%s: %v", d, err)
		}
	}
	stdin.Write([]byte("go\n"))
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		p, _ := m.Pids(name)
		if len(p) >= 32 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the shell forked only %d processes in 10 s: the test tests nothing", len(p))
		}
	}
	if _, err := tree.kill(name); err != nil {
		t.Fatal(err)
	}
	var left []int
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if left, _ = m.Pids(name); len(left) == 0 {
			break
		}
	}
	if len(left) > 0 {
		t.Errorf("%d processes left after one kill", len(left))
	}
	if m.Version() == 1 {
		if b, _ := os.ReadFile(filepath.Join(m.(*V1).FreezerPath(name), "freezer.state")); strings.TrimSpace(string(b)) != "THAWED" {
			t.Errorf("freezer.state %q after the kill", b)
		}
	}
}
