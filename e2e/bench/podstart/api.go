package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"

	"nodeagent/cri"
	"nodeagent/e2e/bench/benchkit"
	"nodeagent/e2e/launch"
)

// apiNode is the agent joined to a control plane of its own (API-server
// mode). Pods are created in the API with spec.nodeName set, so the
// scheduler is not in what is measured, and seen there through a watch.
type apiNode struct {
	cp      *launch.ControlPlane
	client  kubernetes.Interface
	a       *benchkit.Agent
	kubelet *benchkit.Kubelet // the second node; nil without a kubelet side
	ns      string
	stop    chan struct{}

	mu      sync.Mutex
	running map[string]time.Time // pod name -> when the watch first saw its container running
}

func startAPINode(ctx context.Context, rt *cri.Client, bin string) *apiNode {
	dir, err := os.MkdirTemp("", "nodeagent-bench-cp-")
	check(err)
	cp, err := launch.NewControlPlane(bin, dir)
	check(err)
	progress("starting the control plane (" + cp.LogPath() + ")")
	benchkit.AtFail(func() {
		cp.Stop()
		fmt.Fprintln(os.Stderr, "bench: control plane stopped; its state and log are kept in", dir)
	})
	check(cp.Start(2 * time.Minute))
	n := &apiNode{cp: cp, ns: "bench", stop: make(chan struct{}), running: map[string]time.Time{}}
	// kubectl's client is limited to 5 requests a second; the bench's
	// creations must not be what is measured.
	cfg := rest.CopyConfig(cp.Config)
	cfg.QPS, cfg.Burst = 500, 1000
	n.client, err = kubernetes.NewForConfig(cfg)
	check(err)

	name := "bench-api-" + strconv.Itoa(os.Getpid())
	kubeconfig := filepath.Join(dir, "node.kubeconfig")
	check(cp.NodeKubeconfig(name, kubeconfig))
	extra := ""
	if *profiles != "" {
		extra = "enableProfilingHandler: true\n"
	}
	n.a = env.StartAgent(rt, name, extra, "--kubeconfig", kubeconfig)
	n.a.DeletePods = n.deleteAll
	progress("waiting for the node to be Ready in the API")
	n.untilReady(ctx, name)
	kname := "bench-api-kubelet-" + strconv.Itoa(os.Getpid())
	kkubeconfig := filepath.Join(dir, "kubelet.kubeconfig")
	check(cp.NodeKubeconfig(kname, kkubeconfig))
	if n.kubelet = benchkit.StartKubelet(*kubeletBin, *runtimeBin, env.Image, kname, "", kkubeconfig); n.kubelet != nil {
		progress("waiting for the kubelet's node to be Ready in the API")
		if !n.ready(ctx, kname, 2*time.Minute) {
			fmt.Println("bench: no kubelet side in API mode: its node was not Ready within 2 minutes; log", n.kubelet.LogPath())
			n.kubelet.Close()
			n.kubelet = nil
		}
	}
	_, err = n.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n.ns}}, metav1.CreateOptions{})
	check(err)
	n.until(time.Minute, "the namespace's default ServiceAccount", func() bool {
		_, err := n.client.CoreV1().ServiceAccounts(n.ns).Get(ctx, "default", metav1.GetOptions{})
		return err == nil
	})

	f := informers.NewSharedInformerFactoryWithOptions(n.client, 0, informers.WithNamespace(n.ns))
	seen := func(obj any) {
		p, ok := obj.(*corev1.Pod)
		if !ok || len(p.Status.ContainerStatuses) == 0 || p.Status.ContainerStatuses[0].State.Running == nil {
			return
		}
		at := time.Now()
		n.mu.Lock()
		if _, ok := n.running[p.Name]; !ok {
			n.running[p.Name] = at
		}
		n.mu.Unlock()
	}
	_, err = f.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    seen,
		UpdateFunc: func(_, obj any) { seen(obj) },
	})
	check(err)
	f.Start(n.stop)
	f.WaitForCacheSync(n.stop)
	return n
}

// untilReady waits for node to be Ready in the API, and fails the run
// after 2 minutes.
func (n *apiNode) untilReady(ctx context.Context, node string) {
	n.until(2*time.Minute, "node "+node+" Ready", func() bool { return n.ready(ctx, node, 0) })
}

// ready reports whether node is Ready in the API, polling up to timeout.
func (n *apiNode) ready(ctx context.Context, node string, timeout time.Duration) bool {
	for end := time.Now().Add(timeout); ; time.Sleep(200 * time.Millisecond) {
		if got, err := n.client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{}); err == nil {
			for _, c := range got.Status.Conditions {
				if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
					return true
				}
			}
		}
		if !time.Now().Before(end) {
			return false
		}
	}
}

// until polls cond every 20 ms and fails the run after timeout.
func (n *apiNode) until(timeout time.Duration, what string, cond func() bool) {
	for end := time.Now().Add(timeout); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		select {
		case <-n.a.Exited():
			fail("the agent exited; log: " + n.a.LogPath())
		default:
		}
		if n.kubelet != nil {
			select {
			case <-n.kubelet.Exited():
				fail("the kubelet exited; log: " + n.kubelet.LogPath())
			default:
			}
		}
		if cond() {
			return
		}
	}
	fail(fmt.Sprintf("no %s within %s; agent log: %s", what, timeout, n.a.LogPath()))
}

// create makes a pod as the standalone side's manifests, bound to node.
func (n *apiNode) create(ctx context.Context, name, node string) {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: n.ns},
		Spec: corev1.PodSpec{
			NodeName:                      node,
			TerminationGracePeriodSeconds: ptr.To[int64](2),
			Containers: []corev1.Container{{
				Name: "main", Image: env.Image, ImagePullPolicy: corev1.PullIfNotPresent,
				Command: []string{"sleep", "3600"},
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")},
					Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")},
				},
			}},
		},
	}
	_, err := n.client.CoreV1().Pods(n.ns).Create(ctx, p, metav1.CreateOptions{})
	check(err)
}

// started are the runtime's start times of the pods' containers, once
// the API shows every one running; and when the API showed each.
func (n *apiNode) started(ctx context.Context, names []string) (started, seen map[string]time.Time) {
	return n.startedOn(ctx, n.a.RT, map[string]string{cri.LabelManagedBy: n.a.Node, cri.LabelPodNamespace: n.ns}, names)
}

// startedOn is started for pods of the node whose runtime is rt, its
// containers chosen by the labels.
func (n *apiNode) startedOn(ctx context.Context, rt *cri.Client, labels map[string]string, names []string) (started, seen map[string]time.Time) {
	n.until(5*time.Minute, fmt.Sprintf("%d pods Running in the API", len(names)), func() bool {
		n.mu.Lock()
		defer n.mu.Unlock()
		for _, name := range names {
			if _, ok := n.running[name]; !ok {
				return false
			}
		}
		return true
	})
	cs, err := rt.ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: labels})
	check(err)
	want := map[string]bool{}
	for _, name := range names {
		want[name] = true
	}
	started, seen = map[string]time.Time{}, map[string]time.Time{}
	for _, c := range cs {
		name := c.Labels[cri.LabelPodName]
		if !want[name] {
			continue
		}
		st, err := rt.ContainerStatus(ctx, c.Id)
		check(err)
		if at := time.Unix(0, st.StartedAt); at.After(started[name]) {
			started[name] = at // the latest, were there a restart
		}
	}
	n.mu.Lock()
	for _, name := range names {
		seen[name] = n.running[name]
	}
	n.mu.Unlock()
	if len(started) != len(names) {
		fail(fmt.Sprintf("the runtime has containers for %d of %d pods the API shows running", len(started), len(names)))
	}
	return started, seen
}

// deleteAll deletes the namespace's pods (with their 2 s grace period) and
// waits for the API to forget them: the agent confirms each deletion.
func (n *apiNode) deleteAll() {
	ctx := context.Background()
	if err := n.client.CoreV1().Pods(n.ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil && !apierrors.IsNotFound(err) {
		fmt.Fprintln(os.Stderr, "bench: delete the API pods:", err)
		return
	}
	for end := time.Now().Add(2 * time.Minute); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		l, err := n.client.CoreV1().Pods(n.ns).List(ctx, metav1.ListOptions{})
		if err == nil && len(l.Items) == 0 {
			break
		}
	}
	n.mu.Lock()
	n.running = map[string]time.Time{}
	n.mu.Unlock()
}

// shutdown removes the pods, stops the agent and the control plane, and
// removes the control plane's directory.
func (n *apiNode) shutdown() {
	n.a.RemoveAll(true) // deletes the namespace's pods, the kubelet's too
	if n.kubelet != nil {
		n.kubelet.Close()
	}
	close(n.stop)
	n.cp.Stop()
	os.RemoveAll(n.cp.Dir)
}

// requests reads rest_client_requests_total from the agent's /metrics,
// summed by method.
func (n *apiNode) requests() map[string]float64 {
	resp, err := http.Get(n.a.URL("/metrics"))
	check(err)
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "rest_client_requests_total{")
		if !ok {
			continue
		}
		labels, value, ok := strings.Cut(line, "} ")
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(value, 64)
		check(err)
		for _, l := range strings.Split(labels, ",") {
			if m, ok := strings.CutPrefix(l, `method="`); ok {
				out[strings.TrimSuffix(m, `"`)] += v
			}
		}
	}
	check(sc.Err())
	return out
}

// apiResults are the API-server mode side's measurements.
type apiResults struct {
	single, batch []time.Duration // created in the API -> the runtime's start time
	// visibleSingle and visibleBatch run from the runtime's start time to
	// the watch seeing the container running in the API.
	visibleSingle, visibleBatch []time.Duration
	batchRunning                []time.Duration // batch created -> running in the API
	perStart                    map[string]float64
	quiet                       float64 // requests a second with no pods
	idlePods                    int
	idleRequests                float64 // requests a second with idlePods idle
	rss                         []int64
	anon, file                  int64 // RSS parts at the end
	cpu                         time.Duration
	// turns are the batches nodeagent and the kubelet ran in turn as two
	// nodes of the control plane; kubelet its footprint with the last
	// batch idle.
	turns   []apiTurn
	kubelet *footprint
	// agentResize and kubeletResize are each side's in-place resizes at
	// the batch of 30 (nil: not run).
	agentResize, kubeletResize *resizeTimes
}

// apiTurn is one batch size on both nodes, per pod: created in the API ->
// Running in the API, and created -> the runtime's start time.
type apiTurn struct {
	pods                     int
	agent, kubelet           []time.Duration
	agentStart, kubeletStart []time.Duration
}

// quietWindow is how long the node's own requests (lease, status) are
// counted before any pod, to take them out of the per-start count.
const quietWindow = 15 * time.Second

func measureAPI(ctx context.Context, rt *cri.Client) *apiResults {
	n := startAPINode(ctx, rt, *cpBin)
	r := &apiResults{perStart: map[string]float64{}, idlePods: max(*apiIdle, *batch)}

	progress(fmt.Sprintf("API mode: the node's own requests with no pods, for %s", quietWindow))
	before, t := n.requests(), time.Now()
	time.Sleep(quietWindow)
	quietRate := perSecond(n.requests(), before, time.Since(t))
	for _, v := range quietRate {
		r.quiet += v
	}

	progress(fmt.Sprintf("API mode: %d pods one at a time", *singles))
	before, t = n.requests(), time.Now()
	for i := 0; i < *singles; i++ {
		name := fmt.Sprintf("single-%d", i)
		t0 := time.Now()
		n.create(ctx, name, n.a.Node)
		started, seen := n.started(ctx, []string{name})
		r.single = append(r.single, started[name].Sub(t0))
		r.visibleSingle = append(r.visibleSingle, seen[name].Sub(started[name]))
	}
	took := time.Since(t)
	for m, v := range n.requests() {
		r.perStart[m] = (v - before[m] - quietRate[m]*took.Seconds()) / float64(*singles)
	}
	progress("API mode: removing the single pods")
	n.a.RemoveAll(false)

	progress(fmt.Sprintf("API mode: a batch of %d pods", *batch))
	var names []string
	t0 := time.Now()
	for i := 0; i < *batch; i++ {
		names = append(names, fmt.Sprintf("batch-%d", i))
		n.create(ctx, names[i], n.a.Node)
	}
	started, seen := n.started(ctx, names)
	for _, name := range names {
		r.batch = append(r.batch, started[name].Sub(t0))
		r.batchRunning = append(r.batchRunning, seen[name].Sub(t0))
		r.visibleBatch = append(r.visibleBatch, seen[name].Sub(started[name]))
	}

	progress(fmt.Sprintf("API mode: %d more pods, to idle with %d", r.idlePods-*batch, r.idlePods))
	for i := *batch; i < r.idlePods; i++ {
		names = append(names, fmt.Sprintf("idle-%d", i))
		n.create(ctx, names[i], n.a.Node)
	}
	n.started(ctx, names)
	progress(fmt.Sprintf("API mode: %d pods idle for %s", r.idlePods, *idle))
	before = n.requests()
	if *profiles != "" {
		go n.a.SaveProfile(*idle-2*time.Second, filepath.Join(*profiles, "api-idle-cpu.pprof"))
	}
	r.rss, r.cpu = n.a.Watch(*idle)
	r.anon, r.file = benchkit.RSSParts(n.a.Pid())
	for _, v := range perSecond(n.requests(), before, *idle) {
		r.idleRequests += v
	}
	if n.kubelet != nil {
		n.deleteAll()
		r.sideBySide(ctx, n)
	}
	progress("API mode: removing the pods, stopping the nodes and the control plane")
	n.shutdown()
	return r
}

// sideBySide runs batches of 30 and of -batch pods on nodeagent's node,
// then on the kubelet's, and watches the kubelet idle with the last.
func (r *apiResults) sideBySide(ctx context.Context, n *apiNode) {
	k := n.kubelet
	for turn, size := range []int{30, *batch} {
		t := apiTurn{pods: size}
		progress(fmt.Sprintf("API mode: nodeagent's node, a batch of %d", size))
		agentLabels := map[string]string{cri.LabelManagedBy: n.a.Node, cri.LabelPodNamespace: n.ns}
		t.agent, t.agentStart = n.batchRunning(ctx, fmt.Sprintf("agent-%d-", size), size, n.a.Node, n.a.RT, agentLabels)
		if turn == 0 && *resizes > 0 {
			progress(fmt.Sprintf("API mode: nodeagent's node, %d in-place resizes", *resizes))
			rs := n.resizeAll(ctx, "agent-30-", size, *resizes, n.a.RT, agentLabels)
			r.agentResize = &rs
		}
		n.deleteAll()
		progress(fmt.Sprintf("API mode: the kubelet's node, a batch of %d", size))
		t.kubelet, t.kubeletStart = n.batchRunning(ctx, fmt.Sprintf("kubelet-%d-", size), size, k.Node, k.RT,
			map[string]string{cri.LabelPodNamespace: n.ns})
		if turn == 0 && *resizes > 0 {
			progress(fmt.Sprintf("API mode: the kubelet's node, %d in-place resizes", *resizes))
			rs := n.resizeAll(ctx, "kubelet-30-", size, *resizes, k.RT, map[string]string{cri.LabelPodNamespace: n.ns})
			r.kubeletResize = &rs
		}
		if size == *batch {
			progress(fmt.Sprintf("API mode: the kubelet with %d pods idle for %s", size, *idle))
			r.kubelet = &footprint{}
			r.kubelet.idle(k.Watch, k.Pid(), k.HeapInUse)
		}
		n.deleteAll()
		k.RemoveAll() // its stopped sandboxes, which its own collection keeps a minute
		r.turns = append(r.turns, t)
	}
}

// batchRunning creates size pods bound to node at once and returns, per
// pod, creation -> Running in the API and creation -> the runtime's start
// time of its container.
func (n *apiNode) batchRunning(ctx context.Context, prefix string, size int, node string, rt *cri.Client, labels map[string]string) (running, started []time.Duration) {
	var names []string
	t0 := time.Now()
	for i := range size {
		names = append(names, prefix+strconv.Itoa(i))
		n.create(ctx, names[i], node)
	}
	starts, seen := n.startedOn(ctx, rt, labels, names)
	for _, name := range names {
		running = append(running, seen[name].Sub(t0))
		started = append(started, starts[name].Sub(t0))
	}
	return running, started
}

func perSecond(after, before map[string]float64, d time.Duration) map[string]float64 {
	out := map[string]float64{}
	for m, v := range after {
		out[m] = (v - before[m]) / d.Seconds()
	}
	return out
}

func (r *apiResults) print(floorBatch, agentBatch []time.Duration) {
	fmt.Println()
	fmt.Println("API-server mode: pods created in the API with spec.nodeName (no scheduler), seen through a watch")
	fmt.Println("Status visible in the API after the runtime's start time (target p99 <= 100ms)")
	fmt.Printf("%-28s %5s %9s %9s %9s %9s\n", "scenario", "n", "p50", "p90", "p99", "max")
	for _, row := range []struct {
		name string
		d    []time.Duration
	}{{"one at a time", r.visibleSingle}, {fmt.Sprintf("batch of %d", *batch), r.visibleBatch}} {
		fmt.Printf("%-28s %5d %9s %9s %9s %9s\n", row.name, len(row.d), pct(row.d, 50), pct(row.d, 90), pct(row.d, 99), pct(row.d, 100))
	}
	fmt.Println()
	fmt.Printf("Batch of %d, to the last pod: API mode created -> all Running in the API %s; standalone manifests -> all started %s; direct CRI %s\n",
		*batch, pct(r.batchRunning, 100), pct(agentBatch, 100), pct(floorBatch, 100))
	fmt.Println()
	var methods []string
	total := 0.0
	for m, v := range r.perStart {
		if v >= 0.05 {
			methods = append(methods, fmt.Sprintf("%s %.1f", m, v))
		}
		total += v
	}
	sort.Strings(methods)
	fmt.Printf("API requests per pod start (%d one at a time, less the node's own %.2f/s): %.1f (%s)\n",
		*singles, r.quiet, total, strings.Join(methods, ", "))
	fmt.Println()
	sort.Slice(r.rss, func(i, j int) bool { return r.rss[i] < r.rss[j] })
	fmt.Printf("API mode footprint with %d pods idle for %s (targets RSS <= 40 MiB, <= 0.01 core)\n", r.idlePods, *idle)
	fmt.Printf("  RSS MiB: p50 %.1f  max %.1f (at the end: %.1f anonymous, %.1f the binary's pages)   CPU time: %.2f s (%.4f cores)   API requests: %.2f/s\n",
		mib(r.rss[len(r.rss)/2]), mib(r.rss[len(r.rss)-1]), mib(r.anon), mib(r.file), r.cpu.Seconds(), r.cpu.Seconds()/idle.Seconds(), r.idleRequests)
	if r.turns == nil {
		fmt.Println("\nAPI mode, the kubelet's node: skipped (no kubelet side)")
		return
	}
	fmt.Println()
	fmt.Println("API mode, two nodes of one control plane in turn: created in the API -> Running in the API")
	fmt.Println("(started: created -> the runtime's start time of the pod's container)")
	fmt.Printf("%-28s %5s %9s %9s %9s %13s %13s   %s\n", "scenario", "n", "p50", "p99", "max", "started p50", "started p99", "nodeagent / kubelet p50, p99")
	for _, t := range r.turns {
		fmt.Printf("%-28s %5d %9s %9s %9s %13s %13s\n", fmt.Sprintf("nodeagent, batch of %d", t.pods), len(t.agent), pct(t.agent, 50), pct(t.agent, 99), pct(t.agent, 100),
			pct(t.agentStart, 50), pct(t.agentStart, 99))
		fmt.Printf("%-28s %5d %9s %9s %9s %13s %13s   %.2f, %.2f\n", fmt.Sprintf("kubelet, batch of %d", t.pods), len(t.kubelet), pct(t.kubelet, 50), pct(t.kubelet, 99), pct(t.kubelet, 100),
			pct(t.kubeletStart, 50), pct(t.kubeletStart, 99),
			float64(pctD(t.agent, 50))/float64(pctD(t.kubelet, 50)), float64(pctD(t.agent, 99))/float64(pctD(t.kubelet, 99)))
	}
	printResizes(r.agentResize, r.kubeletResize)
	if k := r.kubelet; k != nil {
		fmt.Printf("  the kubelet's node with %d pods idle for %s: RSS MiB p50 %.1f (%.1f anonymous, %.1f the binary's pages), Go heap %.1f MiB, CPU %.4f cores; nodeagent / kubelet RSS %.2f\n",
			*batch, *idle, mib(k.rss[len(k.rss)/2]), mib(k.anon), mib(k.file), k.heap/(1<<20), k.cpu, float64(r.rss[len(r.rss)/2])/float64(k.rss[len(k.rss)/2]))
	}
}
