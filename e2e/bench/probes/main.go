// Command probes is the probe part of `make bench`: N pods run probe-server,
// each with an HTTP readiness probe and a TCP liveness probe at
// periodSeconds 1. With every pod ready, the agent is watched for a while:
// its CPU and RSS, the latency of its probe runs (from its own
// prober_probe_duration_seconds histogram) and how many periods were
// missed. The floor is the same probing done by a bare loop in this process
// against the same pods once the agent is stopped (a fresh connection per
// probe, as the agent makes). Then the real kubelet, on a containerd of
// its own, runs the same pods and is watched as long (its CPU, RSS and
// its own probe histogram). It reports; it asserts nothing.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"nodeagent/e2e/bench/benchkit"
)

var (
	env      = benchkit.Flags()
	pods     = flag.Int("pods", 110, "pods, each with an HTTP readiness and a TCP liveness probe")
	watch    = flag.Duration("duration", 60*time.Second, "how long to watch the agent probing")
	floorFor = flag.Duration("floor", 20*time.Second, "how long to run the floor")
	profile  = flag.String("cpuprofile", "", "save a 20 s CPU profile of the agent, taken while it probes, to this file")
	node     = "bench-probes-" + strconv.Itoa(os.Getpid())
	// The kubelet side: the real kubelet on a containerd of its own.
	kubeletBin, runtimeBin = benchkit.PeerFlags()
)

func main() {
	flag.Parse()
	rt := env.Connect()
	defer rt.Close()

	extra := ""
	if *profile != "" {
		extra = "enableProfilingHandler: true\n"
	}
	a := env.StartAgent(rt, node, extra)
	benchkit.Progress(fmt.Sprintf("starting %d probe-server pods (HTTP readiness + TCP liveness, periodSeconds 1)", *pods))
	for i := 0; i < *pods; i++ {
		a.Write(fmt.Sprintf("probed-%d", i), probedPod(fmt.Sprintf("probed-%d", i)))
	}
	ips := waitReady(a)

	benchkit.Progress(fmt.Sprintf("watching the agent probe %d pods for %s", len(ips), *watch))
	before := a.Scrape()
	if *profile != "" {
		go a.SaveProfile(20*time.Second, *profile)
	}
	rss, cpu := a.Watch(*watch)
	after := a.Scrape()
	if restarted := restarts(a); restarted > 0 {
		fmt.Printf("warning: %d container restarts during the run (liveness failures under load)\n", restarted)
	}
	a.Stop() // the pods keep running for the floor

	benchkit.Progress(fmt.Sprintf("floor: the same probes from a bare loop for %s", *floorFor))
	floorLat, floorCPU, floorRuns := floor(ips, *floorFor)

	benchkit.Progress("cleaning up (an agent of the same node without manifests removes the pods)")
	env.StartAgent(rt, node, "").RemoveAll(true)
	// The first agent's root (its shared bind, its pods' volumes) and cgroups.
	a.RemoveMounts()
	os.RemoveAll(a.Dir)
	a.RemoveCgroups()
	peer := kubeletSide()

	expected := float64(2*len(ips)) * watch.Seconds()
	runs := after.Sum("prober_probe_total") - before.Sum("prober_probe_total")
	missed := after.Sum("nodeagent_prober_missed_periods_total") - before.Sum("nodeagent_prober_missed_periods_total")
	hist := histogram(after, "prober_probe_duration_seconds").minus(histogram(before, "prober_probe_duration_seconds"))
	floorHist := bucketize(floorLat, hist.bounds)
	sort.Slice(rss, func(i, j int) bool { return rss[i] < rss[j] })

	fmt.Println()
	fmt.Printf("%d pods x (HTTP readiness + TCP liveness) at periodSeconds 1, watched %s\n", len(ips), *watch)
	fmt.Printf("%-34s %11s %11s %7s %11s %7s\n", "", "nodeagent", "floor", "ratio", "kubelet", "ratio")
	agentCPU := cpu.Seconds() / watch.Seconds()
	p50, p99 := hist.quantile(0.5), hist.quantile(0.99)
	f50, f99 := floorHist.quantile(0.5), floorHist.quantile(0.99)
	peerCol := func(v, agent float64, format string) (string, string) {
		if peer == nil {
			return "-", "-"
		}
		return fmt.Sprintf(format, v), fmt.Sprintf("%.2f", agent/v)
	}
	var kmean, kcpu, krss, kruns float64
	if peer != nil {
		kmean, kcpu, krss, kruns = peer.mean, peer.cpu, benchkit.MiB(peer.rss[len(peer.rss)/2]), peer.runs
	}
	kv, kr := peerCol(kcpu, agentCPU, "%.4f")
	fmt.Printf("%-34s %11.4f %11.4f %7.2f %11s %7s\n", "CPU (cores)", agentCPU, floorCPU, agentCPU/floorCPU, kv, kr)
	agentMean := mean(after, before, "prober_probe_duration_seconds")
	var floorSum time.Duration
	for _, d := range floorLat {
		floorSum += d
	}
	floorMean := floorSum.Seconds() / float64(len(floorLat))
	kv, kr = peerCol(kmean*1000, agentMean*1000, "%.2fms")
	fmt.Printf("%-34s %11s %11s %7.2f %11s %7s\n", "probe latency mean", ms(agentMean), ms(floorMean), agentMean/floorMean, kv, kr)
	fmt.Printf("%-34s %11s %11s %7.2f %11s\n", "probe latency p50 (histogram est.)", ms(p50), ms(f50), p50/f50, "(no buckets)")
	fmt.Printf("%-34s %11s %11s %7.2f %11s\n", "probe latency p99 (histogram est.)", ms(p99), ms(f99), p99/f99, "(no buckets)")
	fmt.Printf("%-34s %11s %11s\n", "floor latency p50 / p99 (exact)", "", benchkit.Pct(floorLat, 50)+" / "+benchkit.Pct(floorLat, 99))
	kv, _ = peerCol(kruns, runs, "%.0f")
	fmt.Printf("%-34s %11.0f %11d %7s %11s\n", "probe runs (expected "+strconv.Itoa(int(expected))+")", runs, floorRuns, "", kv)
	fmt.Printf("%-34s %11.0f %11s %7s %11s\n", "missed periods", missed, "", "", "(no metric)")
	kv, kr = peerCol(krss, benchkit.MiB(rss[len(rss)/2]), "%.1f")
	fmt.Printf("%-34s %11.1f %11s %7s %11s %7s\n", "RSS MiB p50", benchkit.MiB(rss[len(rss)/2]), "", "", kv, kr)
	if peer != nil && peer.restarts > 0 {
		fmt.Printf("warning: %d kubelet container restarts during the run\n", peer.restarts)
	}
	fmt.Println("the kubelet's probe duration histogram has no buckets but +Inf: its mean only (sum / count)")
	fmt.Println("targets: <= 0.05 core, no missed periods")
}

// probedPod is every bench pod: probe-server with an HTTP readiness and a
// TCP liveness probe at periodSeconds 1.
func probedPod(name string) string {
	return benchkit.PodManifest(name, env.Image, 2, `    command: [probe-server, --grpc=]
    resources: {requests: {cpu: 5m, memory: 8Mi}, limits: {memory: 32Mi}}
    readinessProbe: {httpGet: {path: /healthz, port: 8080}, periodSeconds: 1}
    livenessProbe: {tcpSocket: {port: 8081}, periodSeconds: 1}
`)
}

func ms(s float64) string { return strconv.FormatFloat(s*1000, 'f', 2, 64) + "ms" }

// waitReady waits until every pod is Ready and returns their IPs.
func waitReady(a *benchkit.Agent) []string {
	deadline := time.Now().Add(10 * time.Minute)
	for time.Now().Before(deadline) {
		select {
		case <-a.Exited():
			benchkit.Fail("the agent exited; log: " + a.LogPath())
		default:
		}
		var list corev1.PodList
		benchkit.Check(a.Get("/pods", &list))
		var ips []string
		for _, p := range list.Items {
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
					ips = append(ips, p.Status.PodIP)
				}
			}
		}
		if len(ips) == *pods {
			return ips
		}
		time.Sleep(time.Second)
	}
	benchkit.Fail("pods not ready within 10 minutes; log: " + a.LogPath())
	return nil
}

func restarts(a *benchkit.Agent) int {
	var list corev1.PodList
	benchkit.Check(a.Get("/pods", &list))
	n := 0
	for _, p := range list.Items {
		for _, cs := range p.Status.ContainerStatuses {
			n += int(cs.RestartCount)
		}
	}
	return n
}

// floor probes every pod once a second, each probe in its own goroutine
// with a fresh connection, and returns the latencies, this process's CPU
// in cores, and the number of runs.
func floor(ips []string, d time.Duration) ([]time.Duration, float64, int) {
	client := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true, Proxy: nil}}
	dialer := &net.Dialer{Timeout: time.Second}
	var mu sync.Mutex
	var lat []time.Duration
	record := func(start time.Time) {
		mu.Lock()
		lat = append(lat, time.Since(start))
		mu.Unlock()
	}
	pid := os.Getpid()
	cpu0 := benchkit.CPUTime(pid)
	var wg sync.WaitGroup
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for end := time.Now().Add(d); time.Now().Before(end); <-tick.C {
		for i, ip := range ips {
			// Spread over the period, as containers started at different
			// times spread the agent's probes.
			offset := time.Duration(i) * time.Second / time.Duration(len(ips))
			wg.Add(2)
			go func() {
				defer wg.Done()
				time.Sleep(offset)
				start := time.Now()
				if resp, err := client.Get("http://" + ip + ":8080/healthz"); err == nil {
					io.Copy(io.Discard, io.LimitReader(resp.Body, 10<<10))
					resp.Body.Close()
				}
				record(start)
			}()
			go func() {
				defer wg.Done()
				time.Sleep(offset)
				start := time.Now()
				if c, err := dialer.DialContext(context.Background(), "tcp", ip+":8081"); err == nil {
					c.Close()
				}
				record(start)
			}()
		}
	}
	wg.Wait()
	return lat, (benchkit.CPUTime(pid) - cpu0).Seconds() / d.Seconds(), len(lat)
}

// mean is a histogram's mean over the interval between two scrapes.
func mean(after, before benchkit.Metrics, name string) float64 {
	return (after.Sum(name+"_sum") - before.Sum(name+"_sum")) / (after.Sum(name+"_count") - before.Sum(name+"_count"))
}

// hist is a cumulative histogram summed over probe types.
type hist struct {
	bounds []float64 // upper bounds, +Inf last
	counts []float64 // cumulative
}

func histogram(m benchkit.Metrics, name string) hist {
	byBound := map[float64]float64{}
	for k, v := range m {
		if !strings.HasPrefix(k, name+"_bucket{") {
			continue
		}
		i := strings.Index(k, `le="`)
		s := k[i+4 : strings.IndexByte(k[i+4:], '"')+i+4]
		b := math.Inf(1)
		if s != "+Inf" {
			b, _ = strconv.ParseFloat(s, 64)
		}
		byBound[b] += v
	}
	var h hist
	for b := range byBound {
		h.bounds = append(h.bounds, b)
	}
	sort.Float64s(h.bounds)
	for _, b := range h.bounds {
		h.counts = append(h.counts, byBound[b])
	}
	return h
}

func (h hist) minus(o hist) hist {
	out := hist{bounds: h.bounds, counts: make([]float64, len(h.counts))}
	for i := range h.counts {
		out.counts[i] = h.counts[i]
		if i < len(o.counts) {
			out.counts[i] -= o.counts[i]
		}
	}
	return out
}

func bucketize(d []time.Duration, bounds []float64) hist {
	h := hist{bounds: bounds, counts: make([]float64, len(bounds))}
	for _, x := range d {
		for i, b := range bounds {
			if x.Seconds() <= b {
				h.counts[i]++
			}
		}
	}
	return h
}

// quantile estimates as Prometheus' histogram_quantile does: linear
// interpolation inside the bucket that holds the rank.
func (h hist) quantile(q float64) float64 {
	if len(h.counts) == 0 || h.counts[len(h.counts)-1] == 0 {
		return math.NaN()
	}
	rank := q * h.counts[len(h.counts)-1]
	for i, c := range h.counts {
		if c >= rank {
			lower, below := 0.0, 0.0
			if i > 0 {
				lower, below = h.bounds[i-1], h.counts[i-1]
			}
			if math.IsInf(h.bounds[i], 1) {
				return lower
			}
			if c == below {
				return h.bounds[i]
			}
			return lower + (h.bounds[i]-lower)*(rank-below)/(c-below)
		}
	}
	return h.bounds[len(h.bounds)-2]
}
