// Package benchkit is what the `make bench` programs share: a nodeagent
// under measurement with its own config, manifests and node name, its RSS
// and CPU time from /proc, and percentiles.
package benchkit

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"nodeagent/cri"
	"nodeagent/e2e/launch"
)

// Progress prints a step of a long run.
func Progress(s string) { fmt.Printf("bench: %s ...\n", s) }

// started are the agents to stop if the run fails; atFail is what else
// is to be undone then (a control plane), latest first.
var (
	started []*Agent
	atFail  []func()
	failing sync.Mutex
)

// AtFail has Fail run f after the agents are stopped.
func AtFail(f func()) { atFail = append(atFail, f) }

// Fail ends the run with a message. The agents it started remove their
// pods and stop first: nothing is left running (an agent left behind would
// also keep reconciling cgroups).
func Fail(msg string) {
	// Once: a second failure (the signal's, the main flow's) waits for the
	// first's cleanup and exit.
	failing.Lock()
	fmt.Fprintln(os.Stderr, "bench:", msg)
	for _, a := range started {
		select {
		case <-a.Exited():
		default:
			fmt.Fprintln(os.Stderr, "bench: removing the pods of", a.Node, "(log kept at "+a.LogPath()+")")
			a.removePods()
			a.Stop()
			a.RemoveMounts()
			a.RemoveCgroups() // empty now: its pods are gone
		}
	}
	for i := len(atFail) - 1; i >= 0; i-- {
		atFail[i]()
	}
	os.Exit(1)
}

// Check fails the run on err.
func Check(err error) {
	if err != nil {
		Fail(err.Error())
	}
}

// MiB converts bytes.
func MiB(b int64) float64 { return float64(b) / (1 << 20) }

// Percentile of d (nearest rank below).
func Percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[int(float64(len(s)-1)*p/100)]
}

// Pct formats a percentile in milliseconds.
func Pct(d []time.Duration, p float64) string {
	return Percentile(d, p).Round(time.Millisecond).String()
}

// Agent is a nodeagent under measurement.
type Agent struct {
	*launch.Agent
	RT   *cri.Client
	Node string
	// DeletePods takes away the pods the agent was given other than by
	// manifests (API-server mode deletes them in the API); RemoveAll and
	// Fail call it.
	DeletePods func()
	written    []string
}

// StartAgent runs bin against endpoint with a fresh directory and waits for
// its API. extraConfig is appended to its KubeletConfiguration, args to its
// flags. It logs at info and rescans manifests at the kubelet's 20 s, as a
// production agent.
func StartAgent(rt *cri.Client, bin, endpoint, node, extraConfig string, args ...string) *Agent {
	dir, err := os.MkdirTemp("", "nodeagent-bench-")
	Check(err)
	// Each agent gets its own cgroup root: two agents under one root would
	// take each other's pod cgroups for leftovers.
	l, err := launch.New(launch.Options{Bin: bin, RuntimeEndpoint: endpoint, Dir: dir, NodeName: node,
		CgroupRoot: "/nodeagent-bench-" + filepath.Base(dir), Config: "maxPods: 250\n" + extraConfig,
		Args: args, LogLevel: "info", FileCheckFrequency: 20 * time.Second})
	Check(err)
	a := &Agent{Agent: l, RT: rt, Node: node}
	started = append(started, a)
	if err := l.Start(context.Background(), 30*time.Second); err != nil {
		Fail(err.Error())
	}
	return a
}

// Get decodes a JSON answer of the agent's API.
func (a *Agent) Get(path string, into any) error {
	return a.Client.Get(context.Background(), path, into)
}

// Write puts a manifest into the agent's static pod directory, atomically.
func (a *Agent) Write(name, body string) {
	dir := filepath.Join(a.Dir, "manifests")
	Check(os.MkdirAll(dir, 0o755))
	tmp := filepath.Join(dir, "."+name)
	Check(os.WriteFile(tmp, []byte(body), 0o644))
	Check(os.Rename(tmp, filepath.Join(dir, name+".yaml")))
	a.written = append(a.written, name)
}

// WritePod writes a one-container pod ("main", the image, pulled only if
// absent) with the given grace period; fields are the container's other
// lines (command, resources, probes), each indented by four spaces.
func (a *Agent) WritePod(name, image string, grace int, fields string) {
	a.Write(name, PodManifest(name, image, grace, fields))
}

// PodManifest is the manifest WritePod writes.
func PodManifest(name, image string, grace int, fields string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s}
spec:
  terminationGracePeriodSeconds: %d
  containers:
  - name: main
    image: %s
    imagePullPolicy: IfNotPresent
%s`, name, grace, image, fields)
}

// Watch samples the agent's RSS every second and its CPU time over d.
func (a *Agent) Watch(d time.Duration) (rss []int64, cpu time.Duration) { return watch(a.Pid(), d) }

func watch(pid int, d time.Duration) (rss []int64, cpu time.Duration) {
	start := CPUTime(pid)
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(time.Second) {
		rss = append(rss, RSS(pid))
	}
	return rss, CPUTime(pid) - start
}

// RSS is a process's resident set size in bytes.
func RSS(pid int) int64 { return statusBytes(pid, "VmRSS:") }

// RSSParts splits the resident set: anonymous memory (heap, stacks) and
// file-backed pages (the binary's code and data as touched, which the
// kernel can drop and read again).
func RSSParts(pid int) (anon, file int64) {
	return statusBytes(pid, "RssAnon:"), statusBytes(pid, "RssFile:")
}

// statusBytes reads a "kB" field of /proc/<pid>/status.
func statusBytes(pid int, field string) int64 {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field); ok {
			kb, _ := strconv.ParseInt(strings.Fields(v)[0], 10, 64)
			return kb << 10
		}
	}
	return 0
}

// CPUTime is a process's user plus system time.
func CPUTime(pid int) time.Duration {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	return time.Duration(utime+stime) * time.Second / 100 // USER_HZ
}

// RemoveAll deletes every manifest written so far and waits for the pods
// to go; with stop, it then stops the agent and removes its directory.
func (a *Agent) RemoveAll(stop bool) {
	a.removePods()
	if stop {
		a.Stop()
		a.RemoveMounts()
		os.RemoveAll(a.Dir)
		a.RemoveCgroups() // empty now, in every hierarchy
	}
}

func (a *Agent) removePods() {
	for _, n := range a.written {
		os.Remove(filepath.Join(a.Dir, "manifests", n+".yaml"))
	}
	a.written = nil
	if a.DeletePods != nil {
		a.DeletePods()
	}
	for i := 0; i < 1200; i++ {
		sbs, err := a.RT.ListPodSandbox(context.Background(), &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{cri.LabelManagedBy: a.Node}})
		if err == nil && len(sbs) == 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// SaveProfile saves a CPU profile of the agent over d to file; the agent
// needs enableProfilingHandler.
func (a *Agent) SaveProfile(d time.Duration, file string) {
	a.save(fmt.Sprintf("/debug/pprof/profile?seconds=%d", int(d.Seconds())), file)
}

// save writes the agent's answer at path to file.
func (a *Agent) save(path, file string) {
	resp, err := http.Get(a.URL(path))
	Check(err)
	defer resp.Body.Close()
	f, err := os.Create(file)
	Check(err)
	defer f.Close()
	_, err = io.Copy(f, resp.Body)
	Check(err)
}

// Metrics is one scrape of the agent's /metrics: "name{labels}" -> value.
type Metrics map[string]float64

// Scrape reads the agent's /metrics.
func (a *Agent) Scrape() Metrics {
	resp, err := http.Get(a.URL("/metrics"))
	Check(err)
	defer resp.Body.Close()
	m, err := parseMetrics(resp.Body)
	Check(err)
	return m
}

// parseMetrics reads a Prometheus text page, a line at most 1 MiB.
func parseMetrics(r io.Reader) (Metrics, error) {
	m := Metrics{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") || line == "" {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err == nil {
			m[line[:i]] = v
		}
	}
	return m, sc.Err()
}

// Sum adds every series of a metric.
func (m Metrics) Sum(name string) float64 {
	total := 0.0
	for k, v := range m {
		if k == name || strings.HasPrefix(k, name+"{") {
			total += v
		}
	}
	return total
}

// SaveHeapProfile saves the agent's in-use heap, after a collection, to
// file; the agent needs enableProfilingHandler.
func (a *Agent) SaveHeapProfile(file string) { a.save("/debug/pprof/heap?gc=1", file) }

// HeapInUse is the least of three readings, a second apart, of the agent's
// go_memstats_heap_inuse_bytes: the live heap with as little garbage as
// the collector leaves.
func (a *Agent) HeapInUse() float64 {
	return leastOfThree(func() (Metrics, error) { return a.Scrape(), nil })
}

// Stop sends SIGTERM and waits for the agent to exit.
func (a *Agent) Stop() { a.Agent.Stop(30 * time.Second) }

// Env is what `make bench` hands every bench program.
type Env struct {
	Endpoint, AgentBin, Image string
	AgentFlags                string // more flags for every agent, space-separated
}

// Flags registers -cri, -agent and -image, defaulting to CRI_ENDPOINT,
// NODEAGENT_BIN and TEST_IMAGE; call before flag.Parse.
func Flags() *Env {
	e := &Env{}
	image := os.Getenv("TEST_IMAGE")
	if image == "" {
		image = "127.0.0.1:5050/nodeagent/test:latest"
	}
	flag.StringVar(&e.Endpoint, "cri", os.Getenv("CRI_ENDPOINT"), "CRI endpoint")
	flag.StringVar(&e.AgentBin, "agent", os.Getenv("NODEAGENT_BIN"), "nodeagent binary")
	flag.StringVar(&e.Image, "image", image, "the test image (memhog, probe-server)")
	flag.StringVar(&e.AgentFlags, "agent-flags", "", "more nodeagent flags, space-separated (e.g. --release-binary-pages=false to measure what an option saves)")
	return e
}

// interruptible cancels the work under way (Interruptible) on a signal.
var interruptible atomic.Pointer[context.CancelFunc]

// Interruptible is a context a first Ctrl-C cancels instead of ending the
// run, for work that cleans up after itself when cancelled (experiments);
// done restores the default.
func Interruptible() (ctx context.Context, done func()) {
	ctx, cancel := context.WithCancel(context.Background())
	interruptible.Store(&cancel)
	return ctx, func() { interruptible.Store(nil); cancel() }
}

// Connect checks the settings and dials the runtime. From here on, Ctrl-C
// (or SIGTERM) ends the run as a failure does: pods removed, agents and
// peers stopped, the host as it was.
func (e *Env) Connect() *cri.Client {
	if e.Endpoint == "" || e.AgentBin == "" {
		Fail("need CRI_ENDPOINT and NODEAGENT_BIN (run `make bench`)")
	}
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() {
		s := <-sig
		if cancel := interruptible.Load(); cancel != nil {
			(*cancel)()
			s = <-sig // a second one ends the run at once
		}
		Fail(fmt.Sprintf("%v: cleaning up", s))
	}()
	rt, err := cri.New(e.Endpoint, cri.Options{Timeout: time.Minute})
	Check(err)
	return rt
}

// StartAgent is StartAgent with this environment's binary and endpoint.
func (e *Env) StartAgent(rt *cri.Client, node, extraConfig string, args ...string) *Agent {
	return StartAgent(rt, e.AgentBin, e.Endpoint, node, extraConfig, append(strings.Fields(e.AgentFlags), args...)...)
}
