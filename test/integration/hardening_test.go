//go:build integration

package integration

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"

	"nodeagent/api"
	"nodeagent/cri"
)

// A pod author names a host file in the annotation the agent keeps for
// static pods' manifests; the operator then deletes the misbehaving pod
// with nodectl. The file survives: the annotation never reaches the agent,
// and nodectl refuses the API pod, pointing at kubectl delete.
func TestClusterPodAuthorCannotAimNodectlDeleteAtAHostFile(t *testing.T) {
	n, cp := clusterNode(t, "")
	n.start()
	victim := filepath.Join(t.TempDir(), "etcd.yaml")
	if err := os.WriteFile(victim, []byte("kind: Pod\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	pod := apiPod("aimed-"+randomHex(3), n.name, func(p *corev1.Pod) {
		p.Annotations = map[string]string{api.AnnotationManifest: victim, "kubernetes.io/config.source": "file"}
	})
	ctx := context.Background()
	if _, err := cp.Client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cp.waitAPIPod(t, "default", pod.Name, time.Minute, "Running", func(p *corev1.Pod) error {
		if p.Status.Phase != corev1.PodRunning {
			return fmt.Errorf("phase %s", p.Status.Phase)
		}
		return nil
	})
	local := n.apiPodOnNode(pod.Name)
	if f, ok := local.Annotations[api.AnnotationManifest]; ok || local.Annotations["kubernetes.io/config.source"] != "api" {
		t.Errorf("the agent's pod carries manifest %q and source %q: want no manifest and source api", f, local.Annotations["kubernetes.io/config.source"])
	}
	out, err := n.nodectl("delete", "pod", pod.Name)
	if err == nil {
		t.Errorf("nodectl delete of an API pod succeeded: %s", out)
	}
	if !strings.Contains(out, "kubectl delete") || strings.Count(strings.TrimSpace(out), "\n") > 0 {
		t.Errorf("nodectl delete said %q: want one line pointing at kubectl delete", out)
	}
	if _, err := os.Stat(victim); err != nil {
		t.Fatalf("the host file the annotation named: %v", err)
	}
	if p := n.apiPodOnNode(pod.Name); p.Status.Phase != corev1.PodRunning {
		t.Errorf("the refused pod is %s", p.Status.Phase)
	}
}

// apiPodOnNode is the agent's own view of an API pod (its /pods).
func (n *node) apiPodOnNode(name string) *corev1.Pod {
	n.t.Helper()
	pods, err := n.pods()
	if err != nil {
		n.t.Fatal(err)
	}
	for i := range pods {
		if pods[i].Name == name {
			return &pods[i]
		}
	}
	n.t.Fatalf("pod %s not listed by the agent", name)
	return nil
}

// procField reads one counter of /proc/<pid>/<file> ("VmRSS:" in status,
// "wchar:" in io), in bytes.
func procField(t *testing.T, pid int, file, field string) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, file))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field); ok {
			var n int64
			fmt.Sscan(strings.TrimSpace(v), &n)
			if strings.HasSuffix(v, "kB") {
				n <<= 10
			}
			return n
		}
	}
	t.Fatalf("no %s in /proc/%d/%s", field, pid, file)
	return 0
}

// A pod author projects one 900 KiB configMap key under 3,000 paths: 2.6
// GiB from a 100 KB pod spec. The volume is refused with FailedMount
// naming it and its size, nothing is written, and the agent's memory and
// writes stay flat while the pod is retried.
func TestClusterAmplifiedProjectedVolumeIsRefused(t *testing.T) {
	n, cp := clusterNode(t, "")
	n.start()
	ctx := context.Background()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "big-" + randomHex(3), Namespace: "default"}, Data: map[string]string{"k": strings.Repeat("x", 900<<10)}}
	if _, err := cp.Client.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cp.Client.CoreV1().ConfigMaps("default").Delete(context.Background(), cm.Name, metav1.DeleteOptions{})
	})
	var items []corev1.KeyToPath
	for i := range 3000 {
		items = append(items, corev1.KeyToPath{Key: "k", Path: fmt.Sprintf("copies/%d", i)})
	}
	pod := apiPod("amplified-"+randomHex(3), n.name, func(p *corev1.Pod) {
		p.Spec.Volumes = []corev1.Volume{{Name: "bomb", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: cm.Name}, Items: items}}}}}}}
		p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "bomb", MountPath: "/bomb"}}
	})
	created, err := cp.Client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.eventually("a FailedMount event naming the volume and its size", time.Minute, func() error {
		evs, err := cp.Client.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.uid=" + string(created.UID)})
		if err != nil {
			return err
		}
		for _, e := range evs.Items {
			if e.Reason == "FailedMount" && strings.Contains(e.Message, `volume "bomb"`) && strings.Contains(e.Message, "2.6Gi in 3000 files") {
				return nil
			}
		}
		return fmt.Errorf("events: %v", evs.Items)
	})
	pid := n.pid()
	rss0, wrote0 := procField(t, pid, "status", "VmRSS:"), procField(t, pid, "io", "wchar:")
	time.Sleep(20 * time.Second) // retries at 0.5, 1, 2, 4, 8 s ... of back-off
	rss1, wrote1 := procField(t, pid, "status", "VmRSS:"), procField(t, pid, "io", "wchar:")
	t.Logf("agent while the pod is retried: RSS %d -> %d MiB, %d KiB written", rss0>>20, rss1>>20, (wrote1-wrote0)>>10)
	if rss1-rss0 > 32<<20 {
		t.Errorf("the agent's RSS grew by %d MiB while the refused pod was retried", (rss1-rss0)>>20)
	}
	if wrote1-wrote0 > 16<<20 {
		t.Errorf("the agent wrote %d MiB while the refused pod was retried", (wrote1-wrote0)>>20)
	}
	var written int64
	filepath.Walk(filepath.Join(n.agent.RootDir, "pods", string(created.UID)), func(_ string, info os.FileInfo, err error) error {
		if err == nil && info.Mode().IsRegular() {
			written += info.Size()
		}
		return nil
	})
	if written > 0 {
		t.Errorf("%d bytes of the refused volume are on disk", written)
	}
	p, err := cp.Client.CoreV1().Pods("default").Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Status.Phase != corev1.PodPending || len(p.Status.ContainerStatuses) != 1 || p.Status.ContainerStatuses[0].State.Waiting == nil {
		t.Errorf("status %+v: want Pending, the container waiting", p.Status)
	}
}

// floodFigures are what a test measured while the node was flooded.
type floodFigures struct {
	leaseGaps []time.Duration // between the lease renewals seen
	logs      []time.Duration // authenticated kubectl logs, through the API server
	logErrors []error
	notReady  int // Ready not True in a node read
}

// watchNodeUnderFlood reads the node's lease and Ready condition every
// 100 ms and asks for the pod's logs through the API server (the API
// server's client certificate at :10250) every 2 s, until stop closes.
func watchNodeUnderFlood(t *testing.T, cp *controlPlane, n *node, pod string, stop <-chan struct{}) *floodFigures {
	t.Helper()
	ctx := context.Background()
	f := &floodFigures{}
	var last time.Time
	logsDue := time.Now()
	for {
		select {
		case <-stop:
			return f
		case <-time.After(100 * time.Millisecond):
		}
		if l, err := cp.Client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, n.name, metav1.GetOptions{}); err == nil && l.Spec.RenewTime != nil {
			if rt := l.Spec.RenewTime.Time; rt.After(last) {
				if !last.IsZero() {
					f.leaseGaps = append(f.leaseGaps, rt.Sub(last))
				}
				last = rt
			}
		}
		if nd, err := cp.Client.CoreV1().Nodes().Get(ctx, n.name, metav1.GetOptions{}); err == nil {
			if c := nodeCondition(nd, corev1.NodeReady); c == nil || c.Status != corev1.ConditionTrue {
				f.notReady++
			}
		}
		if time.Now().After(logsDue) {
			logsDue = time.Now().Add(2 * time.Second)
			lctx, cancel := context.WithTimeout(ctx, 15*time.Second)
			start := time.Now()
			_, err := cp.Client.CoreV1().Pods("default").GetLogs(pod, &corev1.PodLogOptions{TailLines: ptr.To[int64](1)}).DoRaw(lctx)
			cancel()
			if err != nil {
				f.logErrors = append(f.logErrors, err)
			} else {
				f.logs = append(f.logs, time.Since(start))
			}
		}
	}
}

// spread is p50 and max of ds, for the log.
func spread(ds []time.Duration) (p50, top time.Duration) {
	if len(ds) == 0 {
		return 0, 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2], s[len(s)-1]
}

// runningAPIPod starts a pod that logs, and waits for it to run.
func runningAPIPod(t *testing.T, cp *controlPlane, n *node, prefix string) string {
	t.Helper()
	pod := apiPod(prefix+"-"+randomHex(3), n.name, nil)
	if _, err := cp.Client.CoreV1().Pods("default").Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cp.waitAPIPod(t, "default", pod.Name, time.Minute, "Running", func(p *corev1.Pod) error {
		if p.Status.Phase != corev1.PodRunning {
			return fmt.Errorf("phase %s", p.Status.Phase)
		}
		return nil
	})
	return pod.Name
}

// Anyone who reaches :10250 can send bearer tokens, each a TokenReview.
// 200 keep-alive clients send random ones for 60 s from loopback: the
// lease renews on schedule (every 2 s here), the node stays Ready, and an
// authenticated kubectl logs is answered all along.
func TestClusterTokenFloodLeavesTheLeaseOnSchedule(t *testing.T) {
	n, cp := clusterNode(t, "")
	n.start()
	pod := runningAPIPod(t, cp, n, "flooded")
	target := fmt.Sprintf("https://%s/pods", net.JoinHostPort(nodeAddress, strconv.Itoa(n.agent.KubeletPort)))
	stop := make(chan struct{})
	var sent, refused atomic.Int64
	var wg sync.WaitGroup
	for range 200 {
		wg.Go(func() {
			client := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{
				TLSClientConfig:   &tls.Config{InsecureSkipVerify: true},
				DialContext:       (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)}}).DialContext,
				ForceAttemptHTTP2: false, MaxIdleConnsPerHost: 1}}
			defer client.CloseIdleConnections()
			for {
				select {
				case <-stop:
					return
				default:
				}
				req, _ := http.NewRequest(http.MethodGet, target, nil)
				req.Header.Set("Authorization", "Bearer "+randomHex(24))
				resp, err := client.Do(req)
				sent.Add(1)
				if err != nil {
					time.Sleep(10 * time.Millisecond)
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusUnauthorized {
					refused.Add(1)
				}
			}
		})
	}
	time.AfterFunc(60*time.Second, func() { close(stop) })
	f := watchNodeUnderFlood(t, cp, n, pod, stop)
	wg.Wait()
	gap50, gapMax := spread(f.leaseGaps)
	logs50, logsMax := spread(f.logs)
	t.Logf("60 s of random tokens: %d requests, %d answered 401; lease renewals every %s (p50), at most %s apart (%d renewals); authenticated logs p50 %s, max %s (%d answered, %d failed)",
		sent.Load(), refused.Load(), gap50.Round(time.Millisecond), gapMax.Round(time.Millisecond), len(f.leaseGaps)+1,
		logs50.Round(time.Millisecond), logsMax.Round(time.Millisecond), len(f.logs), len(f.logErrors))
	if refused.Load() < 1000 {
		t.Errorf("only %d tokens were refused: the flood did not flood", refused.Load())
	}
	// Renewals every quarter of the 8 s lease: two missed in a row would
	// still leave the node alive, three would not.
	if gapMax > 6*time.Second || len(f.leaseGaps) < 20 {
		t.Errorf("lease renewals at most %s apart, %d seen in 60 s: want every 2 s", gapMax, len(f.leaseGaps))
	}
	if f.notReady > 0 {
		t.Errorf("the node was not Ready in %d reads during the flood", f.notReady)
	}
	if len(f.logErrors) > 0 || len(f.logs) < 10 {
		t.Errorf("authenticated kubectl logs during the flood: %d answered, errors %v", len(f.logs), f.logErrors)
	}
}

// queuedBehindTheSiege tells a request that waited for held connections to
// time out (the kubelet server's TLS handshake timeout is 5 s) from one
// that did not.
const queuedBehindTheSiege = 2500 * time.Millisecond

// Half-open connections from one address (TCP connected, no TLS
// handshake) cannot fill :10250: 2,000 are held from loopback, each
// reopened as the agent closes it, for 30 s, while the API server's
// kubectl logs is answered every time.
func TestClusterHalfOpenConnectionsLeaveTheKubeletServerServing(t *testing.T) {
	n, cp := clusterNode(t, "")
	n.start()
	pod := runningAPIPod(t, cp, n, "besieged")
	addr := net.JoinHostPort(nodeAddress, strconv.Itoa(n.agent.KubeletPort))
	stop := make(chan struct{})
	end := time.Now().Add(30 * time.Second)
	var opened atomic.Int64
	var wg sync.WaitGroup
	for range 2000 {
		wg.Go(func() {
			d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)}, Timeout: 5 * time.Second}
			buf := make([]byte, 1)
			for time.Now().Before(end) {
				c, err := d.Dial("tcp", addr)
				if err != nil {
					time.Sleep(50 * time.Millisecond)
					continue
				}
				opened.Add(1)
				start := time.Now()
				c.SetDeadline(end)
				c.Read(buf) // until the agent closes it, or the siege ends
				c.Close()
				if time.Since(start) < 100*time.Millisecond {
					time.Sleep(50 * time.Millisecond) // refused at once: come back
				}
			}
		})
	}
	time.AfterFunc(time.Until(end), func() { close(stop) })
	f := watchNodeUnderFlood(t, cp, n, pod, stop)
	wg.Wait()
	logs50, logsMax := spread(f.logs)
	t.Logf("2,000 half-open connections for 30 s: %d opened; authenticated logs p50 %s, max %s (%d answered, %d failed)",
		opened.Load(), logs50.Round(time.Millisecond), logsMax.Round(time.Millisecond), len(f.logs), len(f.logErrors))
	if opened.Load() < 2000 {
		t.Errorf("only %d connections opened: the siege did not happen", opened.Load())
	}
	if len(f.logErrors) > 0 || len(f.logs) < 10 {
		t.Errorf("kubectl logs while the connections were held: %d answered, errors %v", len(f.logs), f.logErrors)
	}
	// A request queued behind the held connections waits until their TLS
	// handshake timeout (5 s) frees a slot; one that is not queued is
	// answered in a fraction of a second, also on a busy node.
	if logsMax >= queuedBehindTheSiege {
		t.Errorf("kubectl logs took up to %s while the connections were held: it waited behind them", logsMax)
	}
	if f.notReady > 0 {
		t.Errorf("the node was not Ready in %d reads", f.notReady)
	}
}

// A killed agent leaves a pod's directory, a tmpfs mounted in it, and the
// pod goes while the agent is down with nothing of it left in the
// runtime. The restarted agent unmounts and removes the directory; the
// directories it makes are 0750.
func TestLeftoverPodDirectoryIsCleanedUp(t *testing.T) {
	n := newNode(t, "")
	n.writeManifest("left.yaml", podManifest("left", "")+`    volumeMounts: [{name: scratch, mountPath: /scratch}]
  volumes: [{name: scratch, emptyDir: {medium: Memory}}]
`)
	n.start()
	pod := n.waitRunning("left")
	podDir := filepath.Join(n.agent.RootDir, "pods", string(pod.UID))
	for _, dir := range []string{filepath.Join(n.agent.RootDir, "pods"), podDir, filepath.Join(podDir, "volumes")} {
		if st, err := os.Stat(dir); err != nil {
			t.Error(err)
		} else if st.Mode().Perm() != 0o750 {
			t.Errorf("%s: %v, want 0750", dir, st.Mode().Perm())
		}
	}
	if len(mountsUnder(t, podDir)) == 0 {
		t.Fatal("the memory emptyDir is not a mount: the test tests nothing")
	}
	n.kill()
	ctx := context.Background()
	sbs, _ := n.cri.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{cri.LabelPodUID: string(pod.UID)}})
	for _, sb := range sbs {
		n.cri.StopPodSandbox(ctx, sb.Id)
		n.cri.RemovePodSandbox(ctx, sb.Id)
	}
	n.removeManifest("left.yaml")
	n.start()
	n.eventually("the leftover pod directory removed", 30*time.Second, func() error {
		if m := mountsUnder(t, filepath.Join(n.agent.RootDir, "pods")); len(m) > 0 {
			return fmt.Errorf("still mounted: %v", m)
		}
		entries, _ := os.ReadDir(filepath.Join(n.agent.RootDir, "pods"))
		if len(entries) > 0 {
			return fmt.Errorf("left: %v", entries)
		}
		return nil
	})
}
