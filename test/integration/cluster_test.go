//go:build integration

package integration

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	utilversion "k8s.io/apimachinery/pkg/util/version"
	"k8s.io/utils/ptr"

	"nodeagent/e2e/launch"
)

// controlPlane is the control plane shared by the API-mode tests; each test
// joins its own node to it.
type controlPlane struct{ *launch.ControlPlane }

var (
	sharedCP     *controlPlane
	sharedCPErr  error
	sharedCPOnce sync.Once
)

// cluster returns the shared control plane, started on first use.
func cluster(t *testing.T) *controlPlane {
	t.Helper()
	sharedCPOnce.Do(func() {
		dir, err := os.MkdirTemp("", "nodeagent-cp-")
		if err != nil {
			sharedCPErr = err
			return
		}
		l, err := launch.NewControlPlane(controlplaneBin, dir)
		if err != nil {
			sharedCPErr = err
			return
		}
		// Certificates signed for CSRs last a minute: TLS bootstrap's
		// rotation happens within the test.
		l.SigningDuration = time.Minute
		sharedCP = &controlPlane{l}
		if sharedCPErr = l.Start(2 * time.Minute); sharedCPErr != nil {
			return
		}
		// Pods need the default service account, which the controller
		// manager creates shortly after start.
		deadline := time.Now().Add(time.Minute)
		for {
			_, err := l.Client.CoreV1().ServiceAccounts("default").Get(context.Background(), "default", metav1.GetOptions{})
			if err == nil {
				return
			}
			if time.Now().After(deadline) {
				sharedCPErr = fmt.Errorf("no default service account after a minute: %v", err)
				return
			}
			time.Sleep(200 * time.Millisecond)
		}
	})
	if sharedCPErr != nil {
		t.Fatalf("control plane: %v", sharedCPErr)
	}
	return sharedCP
}

// kubeconfig issues a node's client kubeconfig (user system:node:<name>).
func (cp *controlPlane) kubeconfig(t *testing.T, nodeName string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "kubeconfig")
	if err := cp.NodeKubeconfig(nodeName, file); err != nil {
		t.Fatal(err)
	}
	return file
}

// clusterNode is an agent joined to the shared control plane.
func clusterNode(t *testing.T, extraConfig string) (*node, *controlPlane) {
	t.Helper()
	cp := cluster(t)
	// The API server reaches the kubelet server at the node's IP, where
	// it listens, with the cluster CA's client certificate.
	n := newNodeAt(t, nodeAddress, "nodeLeaseDurationSeconds: 8\nnodeStatusUpdateFrequency: 2s\n"+extraConfig+
		"authentication:\n  x509:\n    clientCAFile: "+cp.CAFile()+"\n")
	n.args = append(n.args, "--kubeconfig", cp.kubeconfig(t, n.name), "--node-ip", nodeAddress)
	t.Cleanup(func() {
		cp.Client.CoreV1().Nodes().Delete(context.Background(), n.name, metav1.DeleteOptions{})
	})
	return n, cp
}

func (cp *controlPlane) waitAPIPod(t *testing.T, ns, name string, timeout time.Duration, what string, check func(*corev1.Pod) error) *corev1.Pod {
	t.Helper()
	var last error
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		p, err := cp.Client.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err == nil {
			if last = check(p); last == nil {
				return p
			}
		} else {
			last = err
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("pod %s/%s: %s: not within %s: %v", ns, name, what, timeout, last)
	return nil
}

func apiPod(name, node string, mutate func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PodSpec{
			NodeName:                      node,
			AutomountServiceAccountToken:  ptr.To(false),
			TerminationGracePeriodSeconds: ptr.To[int64](10),
			Containers: []corev1.Container{{
				Name: "main", Image: testImage, ImagePullPolicy: corev1.PullIfNotPresent,
				Command: []string{"sh", "-c", "trap 'exit 0' TERM; while true; do sleep 0.2; done"},
			}},
		},
	}
	if mutate != nil {
		mutate(p)
	}
	return p
}

func condition(p *corev1.Pod, t corev1.PodConditionType) corev1.ConditionStatus {
	for _, c := range p.Status.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return ""
}

func nodeCondition(n *corev1.Node, t corev1.NodeConditionType) *corev1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == t {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

func TestClusterNodeRegistersAndHoldsItsLease(t *testing.T) {
	n, cp := clusterNode(t, "")
	n.args = append(n.args, "--node-labels", "example.com/team=storage,node.kubernetes.io/pool=it")
	n.start()
	ctx := context.Background()
	var node *corev1.Node
	n.eventually("the Node is registered and Ready", 30*time.Second, func() error {
		var err error
		if node, err = cp.Client.CoreV1().Nodes().Get(ctx, n.name, metav1.GetOptions{}); err != nil {
			return err
		}
		if c := nodeCondition(node, corev1.NodeReady); c == nil || c.Status != corev1.ConditionTrue || c.Reason != "KubeletReady" {
			return fmt.Errorf("Ready condition %+v", c)
		}
		return nil
	})
	for k, v := range map[string]string{"kubernetes.io/hostname": n.name, "kubernetes.io/os": "linux", "example.com/team": "storage", "node.kubernetes.io/pool": "it"} {
		if node.Labels[k] != v {
			t.Errorf("label %s = %q, want %q (labels %v)", k, node.Labels[k], v, node.Labels)
		}
	}
	if node.Labels["kubernetes.io/arch"] == "" {
		t.Error("no kubernetes.io/arch label")
	}
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourcePods, corev1.ResourceEphemeralStorage} {
		if q := node.Status.Allocatable[r]; q.IsZero() {
			t.Errorf("allocatable %s missing: %v", r, node.Status.Allocatable)
		}
	}
	for _, c := range []corev1.NodeConditionType{corev1.NodeMemoryPressure, corev1.NodeDiskPressure, corev1.NodePIDPressure} {
		if cond := nodeCondition(node, c); cond == nil || cond.Status != corev1.ConditionFalse || !strings.HasPrefix(cond.Reason, "KubeletHasSufficient") && !strings.HasPrefix(cond.Reason, "KubeletHasNo") {
			t.Errorf("condition %s = %+v", c, cond)
		}
	}
	types := map[corev1.NodeAddressType]string{}
	for _, a := range node.Status.Addresses {
		types[a.Type] = a.Address
	}
	if types[corev1.NodeInternalIP] == "" || types[corev1.NodeHostName] != n.name {
		t.Errorf("addresses %v", node.Status.Addresses)
	}
	info := node.Status.NodeInfo
	if info.BootID == "" || info.KernelVersion == "" || !strings.HasPrefix(info.ContainerRuntimeVersion, "containerd://") || info.KubeletVersion == "" {
		t.Errorf("nodeInfo %+v", info)
	}
	// Version skew checks and the e2e suite's [MinimumKubeletVersion] parse it.
	if v, err := utilversion.ParseSemantic(info.KubeletVersion); err != nil || v.Major() != 1 || v.Minor() != 37 || !strings.Contains(info.KubeletVersion, "+nodeagent.") {
		t.Errorf("kubeletVersion %q: want semver v1.37.x+nodeagent.<version> (%v)", info.KubeletVersion, err)
	}
	if got := node.Status.DaemonEndpoints.KubeletEndpoint.Port; got != int32(n.agent.KubeletPort) {
		t.Errorf("kubelet endpoint port %d, want the configured %d", got, n.agent.KubeletPort)
	}
	if len(node.Status.Images) == 0 {
		t.Error("no images in the node status")
	}

	// The lease: held by the node, owned by it, renewed every 2 s
	// (nodeLeaseDurationSeconds 8).
	var first *coordinationv1.Lease
	n.eventually("the lease exists", 20*time.Second, func() error {
		var err error
		first, err = cp.Client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, n.name, metav1.GetOptions{})
		return err
	})
	if ptr.Deref(first.Spec.HolderIdentity, "") != n.name || ptr.Deref(first.Spec.LeaseDurationSeconds, 0) != 8 {
		t.Errorf("lease spec %+v", first.Spec)
	}
	if len(first.OwnerReferences) != 1 || first.OwnerReferences[0].Kind != "Node" || first.OwnerReferences[0].UID != node.UID {
		t.Errorf("lease owner %+v, want the Node %s", first.OwnerReferences, node.UID)
	}
	n.eventually("the lease is renewed", 15*time.Second, func() error {
		l, err := cp.Client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, n.name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !l.Spec.RenewTime.After(first.Spec.RenewTime.Time) {
			return fmt.Errorf("renewTime still %v", l.Spec.RenewTime)
		}
		return nil
	})

	// A deleted Node is registered again.
	if err := cp.Client.CoreV1().Nodes().Delete(ctx, n.name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	n.eventually("the Node is registered again", 30*time.Second, func() error {
		again, err := cp.Client.CoreV1().Nodes().Get(ctx, n.name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if again.UID == node.UID {
			return fmt.Errorf("still the old Node")
		}
		return nil
	})
}

func TestClusterPodRunsReportsAndStopsGracefully(t *testing.T) {
	n, cp := clusterNode(t, "")
	n.start()
	ctx := context.Background()
	out := t.TempDir()
	pod := apiPod("graceful-"+randomHex(3), n.name, func(p *corev1.Pod) {
		p.Spec.Volumes = []corev1.Volume{{Name: "out", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: out}}}}
		c := &p.Spec.Containers[0]
		c.VolumeMounts = []corev1.VolumeMount{{Name: "out", MountPath: "/out"}}
		// The answer to SIGTERM takes a second: only a stop that honours
		// the grace period lets it finish.
		c.Command = []string{"sh", "-c", "trap 'sleep 1; echo term > /out/term; exit 0' TERM; while true; do sleep 0.2; done"}
		c.Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"sh", "-c", "echo prestop > /out/prestop"}}}}
		c.Resources.Requests = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("16Mi")}
	})
	created, err := cp.Client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	running := cp.waitAPIPod(t, "default", pod.Name, time.Minute, "Running and Ready in the API", func(p *corev1.Pod) error {
		if p.Status.Phase != corev1.PodRunning || condition(p, corev1.PodReady) != corev1.ConditionTrue {
			return fmt.Errorf("phase %s, conditions %v", p.Status.Phase, p.Status.Conditions)
		}
		return nil
	})
	st := running.Status
	if st.PodIP == "" || st.HostIP == "" || len(st.PodIPs) == 0 || len(st.HostIPs) == 0 || st.StartTime == nil || st.QOSClass != corev1.PodQOSBurstable {
		t.Errorf("status %+v", st)
	}
	for _, c := range []corev1.PodConditionType{corev1.PodReadyToStartContainers, corev1.PodInitialized, corev1.ContainersReady, corev1.PodScheduled} {
		if condition(running, c) != corev1.ConditionTrue {
			t.Errorf("condition %s not True: %v", c, st.Conditions)
		}
	}
	if len(st.ContainerStatuses) != 1 || st.ContainerStatuses[0].State.Running == nil || !strings.HasPrefix(st.ContainerStatuses[0].ContainerID, "containerd://") {
		t.Errorf("container statuses %+v", st.ContainerStatuses)
	}

	// kubectl delete: the preStop hook and SIGTERM run, then the agent
	// deletes the object.
	start := time.Now()
	if err := cp.Client.CoreV1().Pods("default").Delete(ctx, pod.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	n.eventually("the pod object is gone", 40*time.Second, func() error {
		_, err := cp.Client.CoreV1().Pods("default").Get(ctx, pod.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there (%v)", err)
	})
	t.Logf("deleted and gone in %s", time.Since(start).Round(time.Millisecond))
	for _, f := range []string{"prestop", "term"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("%s did not run before the stop: %v", f, err)
		}
	}
	if sbs, cs := n.runtimeObjects(string(created.UID)); len(sbs)+len(cs) > 0 {
		t.Errorf("the runtime still holds %d sandboxes and %d containers of the deleted pod", len(sbs), len(cs))
	}

	// Events reached the API server, from the kubelet on this host.
	evs, err := cp.Client.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("involvedObject.uid", string(created.UID)).String()})
	if err != nil {
		t.Fatal(err)
	}
	reasons := map[string]bool{}
	for _, e := range evs.Items {
		if e.Source.Component == "kubelet" && e.Source.Host == n.name {
			reasons[e.Reason] = true
		}
	}
	for _, r := range []string{"Pulled", "Created", "Started", "Killing"} {
		if !reasons[r] {
			t.Errorf("no %s event from kubelet/%s in the API (got %v)", r, n.name, reasons)
		}
	}
}

func TestClusterRejectsPodThatDoesNotFit(t *testing.T) {
	n, cp := clusterNode(t, "")
	n.start()
	pod := apiPod("too-big-"+randomHex(3), n.name, func(p *corev1.Pod) {
		p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("100Ti")}
	})
	if _, err := cp.Client.CoreV1().Pods("default").Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	failed := cp.waitAPIPod(t, "default", pod.Name, 30*time.Second, "Failed with OutOfmemory", func(p *corev1.Pod) error {
		if p.Status.Phase != corev1.PodFailed || p.Status.Reason != "OutOfmemory" {
			return fmt.Errorf("phase %s reason %q", p.Status.Phase, p.Status.Reason)
		}
		return nil
	})
	if !strings.Contains(failed.Status.Message, "Node didn't have enough resource: memory") {
		t.Errorf("message %q", failed.Status.Message)
	}
}

func TestClusterStaticPodsGetMirrorPods(t *testing.T) {
	n, cp := clusterNode(t, "")
	n.start()
	ctx := context.Background()
	n.writeManifest("static.yaml", podManifest("static", ""))
	name := "static-" + n.name
	var node *corev1.Node
	n.eventually("node registered", 20*time.Second, func() (err error) {
		node, err = cp.Client.CoreV1().Nodes().Get(ctx, n.name, metav1.GetOptions{})
		return err
	})
	mirror := cp.waitAPIPod(t, "default", name, time.Minute, "a Running mirror pod", func(p *corev1.Pod) error {
		if p.Status.Phase != corev1.PodRunning {
			return fmt.Errorf("phase %q", p.Status.Phase)
		}
		return nil
	})
	if mirror.Annotations["kubernetes.io/config.mirror"] == "" || mirror.Annotations["kubernetes.io/config.source"] != "file" {
		t.Errorf("annotations %v", mirror.Annotations)
	}
	if refs := mirror.OwnerReferences; len(refs) != 1 || refs[0].Kind != "Node" || refs[0].UID != node.UID || !ptr.Deref(refs[0].Controller, false) {
		t.Errorf("owner references %+v", refs)
	}
	if mirror.Spec.NodeName != n.name {
		t.Errorf("nodeName %q", mirror.Spec.NodeName)
	}

	// Deleted: made again, and the static pod kept running.
	running := n.waitRunning("static")
	if err := cp.Client.CoreV1().Pods("default").Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	cp.waitAPIPod(t, "default", name, 30*time.Second, "a new mirror pod", func(p *corev1.Pod) error {
		if p.UID == mirror.UID {
			return fmt.Errorf("the old mirror")
		}
		return nil
	})
	if again := n.waitRunning("static"); again.Status.ContainerStatuses[0].ContainerID != running.Status.ContainerStatuses[0].ContainerID {
		t.Error("deleting the mirror pod restarted the static pod")
	}

	// The static pod goes: so does its mirror.
	n.removeManifest("static.yaml")
	n.eventually("the mirror pod is deleted", 40*time.Second, func() error {
		_, err := cp.Client.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there (%v)", err)
	})
}

func TestClusterAPIServerRestartRestartsNothing(t *testing.T) {
	n, cp := clusterNode(t, "")
	n.start()
	ctx := context.Background()
	pod := apiPod("survivor-"+randomHex(3), n.name, nil)
	if _, err := cp.Client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	before := cp.waitAPIPod(t, "default", pod.Name, time.Minute, "Running", func(p *corev1.Pod) error {
		if p.Status.Phase != corev1.PodRunning {
			return fmt.Errorf("phase %q", p.Status.Phase)
		}
		return nil
	})

	cp.Stop()
	time.Sleep(3 * time.Second) // the agent's watches break and retry
	if err := cp.Start(2 * time.Minute); err != nil {
		t.Fatalf("restart the control plane: %v", err)
	}
	// A pod created after the restart runs: the source re-listed.
	late := apiPod("late-"+randomHex(3), n.name, nil)
	if _, err := cp.Client.CoreV1().Pods("default").Create(ctx, late, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cp.waitAPIPod(t, "default", late.Name, time.Minute, "Running after the restart", func(p *corev1.Pod) error {
		if p.Status.Phase != corev1.PodRunning {
			return fmt.Errorf("phase %q", p.Status.Phase)
		}
		return nil
	})
	after, err := cp.Client.CoreV1().Pods("default").Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b, a := before.Status.ContainerStatuses[0], after.Status.ContainerStatuses[0]
	if a.ContainerID != b.ContainerID || a.RestartCount != 0 || after.Status.Phase != corev1.PodRunning {
		t.Errorf("the running pod was disturbed: before %s restarts %d, after %s restarts %d phase %s", b.ContainerID, b.RestartCount, a.ContainerID, a.RestartCount, after.Status.Phase)
	}
	for _, p := range []string{pod.Name, late.Name} {
		cp.Client.CoreV1().Pods("default").Delete(ctx, p, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](1)})
	}
}

func TestClusterUnreachableAPIServerKeepsStaticPodsRunning(t *testing.T) {
	n := newNode(t, "")
	port := freePort(t) // nothing listens there
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:%d", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: nope}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`, port)), 0o600); err != nil {
		t.Fatal(err)
	}
	n.args = append(n.args, "--kubeconfig", kubeconfig)
	n.agent.Ready = func(ctx context.Context) error { _, err := n.agent.Client.Pods(ctx); return err }
	n.writeManifest("static.yaml", podManifest("static", ""))
	n.start()
	n.waitRunning("static")
	resp, err := http.Get(n.url("/healthz/apiserver"))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusInternalServerError || !strings.Contains(string(body), kubeconfig) {
		t.Errorf("/healthz/apiserver = %d %q, want 500 naming the kubeconfig", resp.StatusCode, body)
	}
	n.eventually("the log names the kubeconfig", 10*time.Second, func() error {
		if log := n.logText(); !strings.Contains(log, "cannot join the cluster") || !strings.Contains(log, kubeconfig) {
			return fmt.Errorf("not yet")
		}
		return nil
	})
}
