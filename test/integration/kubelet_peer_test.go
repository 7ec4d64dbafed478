//go:build integration

package integration

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"nodeagent/cri"
	"nodeagent/e2e/launch"
)

// The kubelet's peer launcher (make kubelet builds the binary): the real
// kubelet, on a containerd of its own, runs a static pod in its cgroup
// root and on its network; after Stop the host is as before: no pods,
// cgroups, mounts, bridge or state directory, the kernel settings the
// kubelet wrote back as they were, its paths outside its directory gone.
func TestKubeletPeerRunsAPodAndLeavesTheHostAsItWas(t *testing.T) {
	bin, runtimeBin := os.Getenv("KUBELET_BIN"), os.Getenv("RUNTIME_BIN")
	if bin == "" || runtimeBin == "" {
		t.Fatal("need KUBELET_BIN and RUNTIME_BIN: run with `make integration` (it builds the kubelet)")
	}
	before := hostState(t)
	k, err := launch.NewKubelet(launch.KubeletOptions{Bin: bin, RuntimeBin: runtimeBin, Dir: t.TempDir(),
		Registry: envOr("REGISTRY", "127.0.0.1:5050"), PauseImage: envOr("PAUSE_IMAGE", "127.0.0.1:5050/nodeagent/pause:1.0"),
		NodeName: "itest-kubelet-" + randomHex(4), FileCheckFrequency: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			k.Stop()
		}
	})
	ctx := context.Background()
	if err := k.Start(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	manifest := `apiVersion: v1
kind: Pod
metadata: {name: peer}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: ` + testImage + `
    command: ["sleep", "3600"]
    resources: {requests: {cpu: 10m, memory: 16Mi}, limits: {memory: 64Mi}}
`
	if err := os.WriteFile(filepath.Join(k.Manifests, "peer.yaml"), []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	rt, err := cri.New(k.Runtime.Endpoint(), cri.Options{Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	var running *runtimeapi.Container
	for deadline := time.Now().Add(2 * time.Minute); running == nil && time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		cs, err := rt.ListContainers(ctx, &runtimeapi.ContainerFilter{State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cs {
			if c.Labels["io.kubernetes.pod.name"] == "peer-"+k.NodeName {
				running = c
			}
		}
	}
	if running == nil {
		t.Fatalf("the kubelet's static pod did not run within 2 minutes; log %s", k.LogPath())
	}
	sb, err := rt.PodSandboxStatus(ctx, running.PodSandboxId)
	if err != nil {
		t.Fatal(err)
	}
	if ip := sb.GetNetwork().GetIp(); !strings.HasPrefix(ip, "10.89.") {
		t.Errorf("the pod's IP %q is not on the kubelet's network 10.89.0.0/16", ip)
	}
	if podCgroup := "/sys/fs/cgroup/memory" + k.CgroupRoot + "/kubepods/burstable/pod" + sb.GetMetadata().GetUid(); !exists(podCgroup) {
		t.Errorf("the pod's cgroup %s is missing: is the kubelet's cgroup root %s?", podCgroup, k.CgroupRoot)
	}
	// The read-only port's /pods lists it, as the kubelet's own API.
	resp, err := http.Get(k.ReadOnlyURL("/pods", 0))
	if err != nil {
		t.Fatal(err)
	}
	var pods corev1.PodList
	err = json.NewDecoder(resp.Body).Decode(&pods)
	resp.Body.Close()
	if err != nil || len(pods.Items) != 1 || pods.Items[0].Name != "peer-"+k.NodeName {
		t.Errorf("the kubelet's /pods: %d pods (%v), want peer-%s", len(pods.Items), err, k.NodeName)
	}

	// Its container manager has set the node up by now.
	if got := readSysctl("vm/overcommit_memory"); before.sysctls["vm/overcommit_memory"] != "1" && got != "1" {
		t.Errorf("while the kubelet runs vm.overcommit_memory = %s; the kubelet sets 1 (protectKernelDefaults off): is it the kubelet?", got)
	}
	stopped = true
	if err := k.Stop(); err != nil {
		t.Errorf("stop: %v", err)
	}
	after := hostState(t)
	for key, was := range before.sysctls {
		if after.sysctls[key] != was {
			t.Errorf("%s is %s after the kubelet, was %s", key, after.sysctls[key], was)
		}
	}
	for p, was := range before.paths {
		if after.paths[p] != was {
			t.Errorf("%s: %q after the kubelet, was %q", p, after.paths[p], was)
		}
	}
	for _, d := range []string{"/sys/fs/cgroup/memory" + k.CgroupRoot, "/sys/fs/cgroup/cpu" + k.CgroupRoot,
		"/sys/fs/cgroup/cpuset" + k.CgroupRoot, "/sys/fs/cgroup/unified" + k.CgroupRoot, k.Runtime.RunDir} {
		if exists(d) {
			t.Errorf("%s is left after the kubelet", d)
		}
	}
	if err := exec.Command("ip", "link", "show", k.Bridge).Run(); err == nil {
		t.Errorf("the kubelet's bridge %s is left", k.Bridge)
	}
	if links, _ := filepath.Glob("/var/log/containers/*"); len(links) > 0 {
		for _, l := range links {
			if to, _ := os.Readlink(l); strings.HasPrefix(to, k.Dir) {
				t.Errorf("the log link %s -> %s is left", l, to)
			}
		}
	}
	// The masquerade rules of its pods' network went with the pods.
	if out, err := exec.Command("iptables-save").Output(); err != nil || strings.Contains(string(out), `\"`+k.Bridge+`\"`) {
		t.Errorf("iptables rules of the network %s are left (or iptables-save failed: %v)", k.Bridge, err)
	}
	if exists("/var/lib/cni/networks/" + k.Bridge) {
		t.Errorf("/var/lib/cni/networks/%s is left", k.Bridge)
	}
	if b, _ := os.ReadFile("/proc/self/mountinfo"); strings.Contains(string(b), k.Dir) || strings.Contains(string(b), k.Runtime.RunDir) {
		t.Errorf("mounts under %s or %s are left", k.Dir, k.Runtime.RunDir)
	}
}

type host struct {
	sysctls map[string]string
	paths   map[string]string // path -> mode, or "" when absent
}

func hostState(t *testing.T) host {
	h := host{sysctls: map[string]string{}, paths: map[string]string{}}
	for _, k := range []string{"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops",
		"kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes"} {
		h.sysctls[k] = readSysctl(k)
	}
	for _, p := range []string{"/var/lib/kubelet", "/var/lib/kubelet/device-plugins", "/var/lib/kubelet/device-plugins/kubelet.sock",
		"/var/log/containers", "/usr/libexec/kubernetes", "/var/lib/kubelet/pki"} {
		if st, err := os.Lstat(p); err == nil {
			h.paths[p] = st.Mode().String()
		} else {
			h.paths[p] = ""
		}
	}
	return h
}

func readSysctl(key string) string {
	b, _ := os.ReadFile(filepath.Join("/proc/sys", key))
	return strings.TrimSpace(string(b))
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
