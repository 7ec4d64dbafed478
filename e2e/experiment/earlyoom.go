package experiment

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"nodeagent/e2e/launch"
)

// earlyoomPeer is the userspace OOM daemon acting on the pressure: pods
// run on a nodeagent whose memory eviction is off, and earlyoom watches
// the host's MemAvailable. It knows nothing of kubepods, so its margin is
// set where the scenario's threshold would be if the host stayed still:
// MemAvailable at the start less the pods' budget above the threshold.
type earlyoomPeer struct {
	*agent
	cmd  *exec.Cmd
	done chan struct{}
	out  *os.File

	mu    sync.Mutex
	kills []earlyoomKill
}

type earlyoomKill struct {
	at   time.Time
	pid  int
	line string
	// podUID is read from the victim's /proc/<pid>/cgroup as the line
	// arrives: earlyoom prints it before it signals.
	podUID string
}

// earlyoomSettings are nodeagent's for the earlyoom peer: the scenario's
// pods memory, the memory thresholds off (0% means unset).
func earlyoomSettings(s *Scenario, nodeMemory int64) string {
	out := fmt.Sprintf("evictionHard: {memory.available: \"0%%\", allocatableMemory.available: \"0%%\"}\nevictionPressureTransitionPeriod: 5s\n")
	if pm := s.Agent.PodsMemory; pm != nil {
		out = fmt.Sprintf("kubeReserved: {memory: \"%d\"}\n", nodeMemory-pm.Value()) + out
	}
	return out
}

// hardMemoryMargin is the scenario's hard memory threshold on the pods:
// allocatableMemory.available, else memory.available (which the kubelet
// and nodeagent apply to the pods' allocatable too).
func hardMemoryMargin(s *Scenario) (int64, error) {
	for _, sig := range []string{"allocatableMemory.available", "memory.available"} {
		if v, ok := s.Agent.EvictionHard[sig]; ok {
			q, err := resource.ParseQuantity(v)
			if err != nil {
				return 0, fmt.Errorf("a quantity threshold is needed, not %s=%s", sig, v)
			}
			return q.Value(), nil
		}
	}
	return 0, errors.New("no hard memory threshold (allocatableMemory.available or memory.available) to set the margin at")
}

func startEarlyoom(ctx context.Context, s *Scenario, env Env, dir string, nodeMemory int64) (*earlyoomPeer, error) {
	margin, err := hardMemoryMargin(s)
	if err != nil {
		return nil, err
	}
	a, err := startAgent(ctx, env, filepath.Join(dir, "agent"), earlyoomSettings(s, nodeMemory), nil, "--eviction-ranking", s.Agent.EvictionRanking)
	if err != nil {
		return nil, err
	}
	budget := nodeMemory
	if pm := s.Agent.PodsMemory; pm != nil {
		budget = pm.Value()
	}
	_, available, err := NodeMemory()
	if err != nil {
		a.stop()
		return nil, err
	}
	minKiB := (available - (budget - margin)) / 1024
	if minKiB <= 0 {
		a.stop()
		return nil, fmt.Errorf("earlyoom: the host has %d MiB available, less than the pods' %d MiB above the margin", available>>20, (budget-margin)>>20)
	}
	out, err := os.Create(filepath.Join(dir, "earlyoom.log"))
	if err != nil {
		a.stop()
		return nil, err
	}
	// SIGKILL at the margin (kill size = size), as a hard threshold kills;
	// no memory reports.
	size := strconv.FormatInt(minKiB, 10)
	cmd := exec.Command(env.EarlyoomBin, "-M", size+","+size, "-r", "0")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	pipe, err := cmd.StdoutPipe()
	if err == nil {
		cmd.Stderr = cmd.Stdout
		err = cmd.Start()
	}
	if err != nil {
		out.Close()
		a.stop()
		return nil, fmt.Errorf("start %s: %w", env.EarlyoomBin, err)
	}
	p := &earlyoomPeer{agent: a, cmd: cmd, done: make(chan struct{}), out: out}
	go p.read(pipe)
	return p, nil
}

// killLine is earlyoom's report of a kill: `sending SIGKILL to process
// 1234 uid 0 "memhog": ...`.
var killLine = regexp.MustCompile(`sending SIG(KILL|TERM) to process (\d+)`)

// read keeps earlyoom's output in its log, timing each kill line as it
// arrives (earlyoom prints it as it signals).
func (p *earlyoomPeer) read(r io.Reader) {
	defer close(p.done)
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		at := time.Now()
		fmt.Fprintf(p.out, "%s %s\n", at.Format(time.RFC3339Nano), line)
		if m := killLine.FindStringSubmatch(line); m != nil {
			pid, _ := strconv.Atoi(m[2])
			k := earlyoomKill{at: at, pid: pid, line: line, podUID: podUIDOf(pid)}
			p.mu.Lock()
			p.kills = append(p.kills, k)
			p.mu.Unlock()
		}
	}
	io.Copy(io.Discard, r)
}

// collect adds earlyoom's kills; the pod each hit is the one whose
// container ended by a signal at that time (collect runs before the pods
// go). The agent's own traces are empty: its eviction is off.
func (p *earlyoomPeer) collect(r *Run) error {
	p.mu.Lock()
	kills := append([]earlyoomKill(nil), p.kills...)
	p.mu.Unlock()
	pods, err := p.pods()
	if err != nil {
		return err
	}
	for _, k := range kills {
		pod := ""
		for _, pd := range pods {
			if k.podUID != "" && string(pd.UID) == k.podUID {
				pod = podGroupName(pd.Name, p.nodeName)
			}
		}
		r.Events = append(r.Events, Event{T: Elapsed(r.Start, k.at), Kind: "kill", By: "earlyoom", Pod: pod, Note: k.line})
	}
	return nil
}

// podCgroup finds a pod's UID in a cgroup path (.../pod<uid>/...): a
// UUID, or for a static pod a hash.
var podCgroup = regexp.MustCompile(`(?m)/pod([0-9a-f-]{32,36})(?:/|$)`)

// podUIDOf is the UID of the pod whose cgroup holds pid, or "" (not a
// pod's, or gone).
func podUIDOf(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return ""
	}
	if m := podCgroup.FindStringSubmatch(string(b)); m != nil {
		return m[1]
	}
	return ""
}

func (p *earlyoomPeer) stop() {
	launch.Terminate(p.cmd.Process, p.done, 5*time.Second)
	p.cmd.Wait()
	p.out.Close()
	p.agent.stop()
}
