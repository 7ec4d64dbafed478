package standin

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

func testUnit(t *testing.T) (*Unit, string) {
	t.Helper()
	dir := t.TempDir()
	args := filepath.Join(dir, "args")
	u := &Unit{
		Name: "kubelet-nodeagent",
		// Records its arguments, then waits to be stopped.
		Argv:    []string{"sh", "-c", `echo "$@" > ` + args + `; exec sleep 300`, "agent", "--config", filepath.Join(dir, "own.yaml"), "--root-dir", "/r"},
		Config:  filepath.Join(dir, "kubelet-config"),
		PIDFile: filepath.Join(dir, "agent.pid"),
		Log:     filepath.Join(dir, "agent.log"),
	}
	t.Cleanup(func() { u.Stop(5 * time.Second) })
	return u, args
}

func ctl(t *testing.T, u *Unit, args ...string) (string, int) {
	t.Helper()
	var out bytes.Buffer
	err := Systemctl(u, args, &out)
	var exit *ExitError
	switch {
	case err == nil:
		return out.String(), 0
	case errors.As(err, &exit):
		return out.String(), exit.Code
	}
	t.Fatalf("systemctl %v: %v", args, err)
	return "", 0
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if ok() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

// The suite's way with the kubelet, on the stand-in: find the running
// unit by its kubelet-\w+ name, kill it, restart it on the configuration
// the suite wrote.
func TestSystemctlDrivesTheUnitAsTheSuiteDoes(t *testing.T) {
	u, args := testUnit(t)
	unitName := regexp.MustCompile(`(kubelet-\w+)`)
	if out, code := ctl(t, u, "list-units", "*kubelet*", "--state=running"); code != 0 || unitName.MatchString(out) {
		t.Fatalf("a stopped unit listed as running (%d):\n%s", code, out)
	}
	if out, _ := ctl(t, u, "list-units", "*kubelet*"); unitName.FindString(out) != "kubelet-nodeagent" || !strings.Contains(out, "inactive") {
		t.Errorf("the stopped unit not listed as inactive:\n%s", out)
	}
	if _, code := ctl(t, u, "start", "kubelet-nodeagent.service"); code != 0 {
		t.Fatalf("start: %d", code)
	}
	waitFor(t, "the agent's arguments", func() bool { b, _ := os.ReadFile(args); return len(b) > 0 })
	if b, _ := os.ReadFile(args); !strings.Contains(string(b), "own.yaml") {
		t.Errorf("started with %q, want its own config before the suite wrote one", b)
	}
	out, _ := ctl(t, u, "list-units", "*kubelet*", "--state=running")
	if unitName.FindString(out) != "kubelet-nodeagent" {
		t.Fatalf("the running unit not found as the suite looks for it:\n%s", out)
	}
	if out, code := ctl(t, u, "is-active", "kubelet-nodeagent"); code != 0 || strings.TrimSpace(out) != "active" {
		t.Errorf("is-active: %q %d", out, code)
	}

	// mustStopKubelet: reset-failed, kill; then the suite's config and a restart.
	first := u.pid()
	for _, verb := range []string{"reset-failed", "kill"} {
		if _, code := ctl(t, u, verb, "kubelet-nodeagent"); code != 0 {
			t.Fatalf("%s: %d", verb, code)
		}
	}
	waitFor(t, "the killed agent gone", func() bool { return !u.Running() })
	if out, code := ctl(t, u, "is-active", "kubelet-nodeagent"); code != 3 || strings.TrimSpace(out) != "inactive" {
		t.Errorf("is-active after kill: %q %d", out, code)
	}
	os.WriteFile(u.Config, []byte("kind: KubeletConfiguration\n"), 0o644)
	os.Remove(args)
	if _, code := ctl(t, u, "restart", "kubelet-nodeagent"); code != 0 {
		t.Fatalf("restart: %d", code)
	}
	waitFor(t, "the restarted agent's arguments", func() bool { b, _ := os.ReadFile(args); return len(b) > 0 })
	b, _ := os.ReadFile(args)
	if got := string(b); !strings.Contains(got, "--config "+u.Config+" --root-dir /r") {
		t.Errorf("restarted with %q, want the suite's kubelet-config in place of its own", got)
	}
	if u.pid() == first || u.pid() == 0 {
		t.Error("restart did not start a new process")
	}
	// restart of a running unit stops it first.
	second := u.pid()
	if _, code := ctl(t, u, "restart", "kubelet-nodeagent"); code != 0 || u.pid() == second || u.pid() == 0 {
		t.Errorf("restart of a running unit: code %d, pid %d (was %d)", code, u.pid(), second)
	}
	if _, code := ctl(t, u, "stop", "kubelet-nodeagent"); code != 0 || u.Running() {
		t.Errorf("stop: code %d, running %v", code, u.Running())
	}
}

// Other units are not found, with systemctl's exit code; unknown verbs
// and signals are refused.
func TestSystemctlRefusesWhatItDoesNotKnow(t *testing.T) {
	u, _ := testUnit(t)
	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{"restart", "containerd"}, 5},
		{[]string{"kill", "kubelet-nodeagent", "--signal=BOGUS"}, 1},
		{[]string{"daemon-reload"}, 1},
		{[]string{"enable", "kubelet-nodeagent"}, 1},
		{nil, 1},
	} {
		if _, code := ctl(t, u, tc.args...); code != tc.code {
			t.Errorf("systemctl %v: exit %d, want %d", tc.args, code, tc.code)
		}
	}
	if u.Running() {
		t.Error("a refused command started the unit")
	}
}

func TestSudoCommand(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"systemctl", "list-units", "*kubelet*"}, "systemctl list-units *kubelet*"},
		{[]string{"-E", "-n", "kill", "-SIGKILL", "42"}, "kill -SIGKILL 42"},
		{[]string{"-u", "root", "--", "sh", "-c", "echo 0"}, "sh -c echo 0"},
	} {
		if got, err := SudoCommand(tc.args); err != nil || strings.Join(got, " ") != tc.want {
			t.Errorf("sudo %v: %q %v, want %q", tc.args, got, err, tc.want)
		}
	}
	for _, bad := range [][]string{nil, {"-n"}, {"-u", "nobody", "id"}, {"--"}} {
		if got, err := SudoCommand(bad); err == nil {
			t.Errorf("sudo %v: ran %q", bad, got)
		}
	}
}

func TestLoadUnitNamesWhatIsMissing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "unit.json")
	os.WriteFile(path, []byte(`{"name": "kubelet-nodeagent"}`), 0o644)
	if _, err := LoadUnit(path); err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "argv") {
		t.Errorf("incomplete unit file: %v", err)
	}
	if _, err := LoadUnit(filepath.Join(t.TempDir(), "none.json")); err == nil {
		t.Error("a missing unit file loaded")
	}
}

// An agent that refuses the suite's configuration exits at once: the
// restart fails with its last line, and the unit is not running.
func TestRestartReportsAnAgentThatExitsAtOnce(t *testing.T) {
	u, _ := testUnit(t)
	u.Argv = []string{"sh", "-c", `echo "nodeagent: evictionHard.memory.available: invalid value"; exit 1`}
	var out bytes.Buffer
	err := Systemctl(u, []string{"restart", "kubelet-nodeagent"}, &out)
	if err == nil || !strings.Contains(err.Error(), "evictionHard.memory.available: invalid value") {
		t.Errorf("restart of an agent that exits at once: %v", err)
	}
	if u.Running() {
		t.Error("the unit runs")
	}
}
