//go:build integration

package integration

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"nodeagent/cgroups"
)

// summary fetches /stats/summary, refusing any field the upstream types
// do not have.
func (n *node) summary() statsapi.Summary {
	n.t.Helper()
	resp, err := http.Get(n.url("/stats/summary"))
	if err != nil {
		n.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		n.t.Fatalf("/stats/summary: %s", resp.Status)
	}
	dec := json.NewDecoder(resp.Body)
	dec.DisallowUnknownFields()
	var s statsapi.Summary
	if err := dec.Decode(&s); err != nil {
		n.t.Fatalf("/stats/summary does not decode into the upstream Summary type: %v", err)
	}
	return s
}

func podStats(s statsapi.Summary, name string) *statsapi.PodStats {
	for i := range s.Pods {
		if s.Pods[i].PodRef.Name == name {
			return &s.Pods[i]
		}
	}
	return nil
}

// workingSet is a cgroup's usage less its inactive file cache.
func workingSet(t *testing.T, path string) uint64 { return cgroupMemory(t, path).WorkingSet() }

// cpuUsage is a cgroup's cumulative CPU time in ns ("" for the node).
func cpuUsage(t *testing.T, path string) uint64 {
	t.Helper()
	v, err := cgroups.CPUUsage(cgroupManager(t), path)
	if err != nil {
		t.Fatalf("CPU usage of cgroup %q: %v", path, err)
	}
	return v
}

// podsCover: the summary's pods system container holds at least ps's
// working set.
func podsCover(s statsapi.Summary, ps *statsapi.PodStats) bool {
	for _, c := range s.Node.SystemContainers {
		if c.Name == statsapi.SystemContainerPods && c.Memory != nil && c.Memory.WorkingSetBytes != nil && ps.Memory != nil && ps.Memory.WorkingSetBytes != nil {
			return *c.Memory.WorkingSetBytes >= *ps.Memory.WorkingSetBytes
		}
	}
	return false
}

func within(got, want, slack uint64) bool { return got+slack >= want && got <= want+slack }

// A pod holding 64 MiB, with 4 MiB in an emptyDir: /stats/summary parses
// with the upstream types, and its numbers agree with the cgroup files
// read beside it; /metrics/resource and /metrics/cadvisor carry the same
// working sets; nodectl top and cgroups show them; /healthz names its
// components.
func TestStatsSummaryAgreesWithTheCgroupFiles(t *testing.T) {
	// Volumes are measured every second, not every minute: the first
	// measure may come before the pod wrote its 4 MiB (a slow node, the VM).
	n := newNode(t, "volumeStatsAggPeriod: 1s\n")
	n.writeManifest("hog.yaml", scriptPod("hog", "", "dd if=/dev/zero of=/state/f bs=1M count=4 2>/dev/null && exec memhog --mb 64 --rate 0",
		"    resources: {requests: {cpu: 100m, memory: 32Mi}, limits: {memory: 256Mi}}\n"))
	n.start()
	pod := n.waitRunning("hog")
	podCgroup := filepath.Join(n.cgroupRoot, "kubepods", "burstable", "pod"+string(pod.UID))
	containerID := strings.TrimPrefix(pod.Status.ContainerStatuses[0].ContainerID, "containerd://")
	const MiB = 1 << 20

	// Wait until the hog holds its 64 MiB, its emptyDir measures its 4 MiB
	// and a CPU rate is known (two readings at least a second apart).
	var s statsapi.Summary
	var ps *statsapi.PodStats
	n.eventually("the hog's 64 MiB, its volume's 4 MiB and CPU rate in /stats/summary", 30*time.Second, func() error {
		s = n.summary()
		ps = podStats(s, pod.Name)
		switch {
		case ps == nil:
			return fmt.Errorf("pod not in the summary")
		case ps.Memory == nil || ps.Memory.WorkingSetBytes == nil || *ps.Memory.WorkingSetBytes < 64*MiB:
			return fmt.Errorf("pod memory %+v", ps.Memory)
		case ps.CPU == nil || ps.CPU.UsageNanoCores == nil:
			return fmt.Errorf("no CPU rate yet")
		case !podsCover(s, ps):
			// cadvisor samples each cgroup on its own schedule: kubepods'
			// reading may predate the hog's last allocation (the VM).
			return fmt.Errorf("the pods system container's reading predates the hog's: %+v", s.Node.SystemContainers)
		}
		for _, v := range ps.VolumeStats {
			if v.Name == "state" && v.UsedBytes != nil && *v.UsedBytes >= 4*MiB {
				return nil
			}
		}
		return fmt.Errorf("volume state not measured at 4 MiB yet: %+v", ps.VolumeStats)
	})
	podWS, containerWS := workingSet(t, podCgroup), workingSet(t, filepath.Join(podCgroup, containerID))
	podCPU := cpuUsage(t, podCgroup)
	nodeCPU := cpuUsage(t, "")

	if ps.PodRef.Namespace != "default" || ps.PodRef.UID != string(pod.UID) {
		t.Errorf("podRef %+v", ps.PodRef)
	}
	if got := *ps.Memory.WorkingSetBytes; !within(got, podWS, 4*MiB) {
		t.Errorf("pod working set %d, cgroup files say %d", got, podWS)
	}
	if ps.CPU.UsageCoreNanoSeconds == nil || *ps.CPU.UsageCoreNanoSeconds == 0 || *ps.CPU.UsageCoreNanoSeconds > podCPU {
		t.Errorf("pod CPU %v ns, want >0 and <= cpuacct.usage read after (%d)", ps.CPU.UsageCoreNanoSeconds, podCPU)
	}
	if ps.Memory.RSSBytes == nil || *ps.Memory.RSSBytes < 60*MiB {
		t.Errorf("pod RSS %v, want the hog's 64 MiB", ps.Memory.RSSBytes)
	}
	if len(ps.Containers) != 1 || ps.Containers[0].Name != "main" {
		t.Fatalf("containers %+v", ps.Containers)
	}
	c := ps.Containers[0]
	if c.Memory == nil || !within(*c.Memory.WorkingSetBytes, containerWS, 4*MiB) {
		t.Errorf("container working set %+v, cgroup files say %d", c.Memory, containerWS)
	}
	if c.Memory.AvailableBytes == nil || !within(*c.Memory.AvailableBytes, 256*MiB-*c.Memory.WorkingSetBytes, 0) {
		t.Errorf("container available %v, want the 256Mi limit less the working set", c.Memory.AvailableBytes)
	}
	if c.Rootfs == nil || c.Rootfs.UsedBytes == nil || c.Logs == nil || c.Logs.UsedBytes == nil {
		t.Errorf("container rootfs %+v logs %+v", c.Rootfs, c.Logs)
	}
	var vol *statsapi.VolumeStats
	for i := range ps.VolumeStats {
		if ps.VolumeStats[i].Name == "state" {
			vol = &ps.VolumeStats[i]
		}
	}
	if vol == nil || vol.UsedBytes == nil || !within(*vol.UsedBytes, 4*MiB+4096, 64*1024) {
		t.Errorf("emptyDir state %+v (used %v), want its 4 MiB", vol, usedBytes(vol))
	} else if ps.EphemeralStorage == nil || *ps.EphemeralStorage.UsedBytes < *vol.UsedBytes {
		t.Errorf("ephemeral storage %+v less than the volume", ps.EphemeralStorage)
	}
	if ps.Network == nil || ps.Network.Name != "eth0" || ps.Network.RxBytes == nil {
		t.Errorf("pod network %+v, want eth0", ps.Network)
	}
	if ps.ProcessStats == nil || ps.ProcessStats.ProcessCount == nil || *ps.ProcessStats.ProcessCount != 1 {
		t.Errorf("process count %v, want 1 (the hog)", ps.ProcessStats)
	}

	nd := s.Node
	if nd.NodeName != n.name || nd.Memory == nil || nd.Memory.WorkingSetBytes == nil || nd.Memory.AvailableBytes == nil {
		t.Fatalf("node stats %+v", nd)
	}
	if total := *nd.Memory.WorkingSetBytes + *nd.Memory.AvailableBytes; total != uint64(memTotal(t)) {
		t.Errorf("node working set + available = %d, want MemTotal %d", total, memTotal(t))
	}
	if nd.CPU == nil || nd.CPU.UsageCoreNanoSeconds == nil || *nd.CPU.UsageCoreNanoSeconds > nodeCPU || *nd.CPU.UsageCoreNanoSeconds < podCPU/2 {
		t.Errorf("node CPU %v, cpuacct.usage read after %d", nd.CPU, nodeCPU)
	}
	if nd.Fs == nil || nd.Fs.CapacityBytes == nil || *nd.Fs.CapacityBytes == 0 || nd.Runtime == nil || nd.Runtime.ImageFs == nil || nd.Runtime.ImageFs.UsedBytes == nil {
		t.Errorf("node fs %+v runtime %+v", nd.Fs, nd.Runtime)
	}
	if nd.Rlimit == nil || nd.Rlimit.MaxPID == nil || nd.Rlimit.NumOfRunningProcesses == nil || *nd.Rlimit.NumOfRunningProcesses <= 0 {
		t.Errorf("rlimit %+v", nd.Rlimit)
	}
	if len(nd.SystemContainers) != 1 || nd.SystemContainers[0].Name != statsapi.SystemContainerPods ||
		*nd.SystemContainers[0].Memory.WorkingSetBytes < *ps.Memory.WorkingSetBytes {
		t.Errorf("system containers %+v, want pods holding at least the hog", nd.SystemContainers)
	}

	// The resource metrics metrics-server reads, and cadvisor's.
	labels := []string{"container=main", "pod=" + pod.Name, "namespace=default"}
	res := n.scrape("/metrics/resource")
	if v, ok := metricValue(res, "container_memory_working_set_bytes", labels...); !ok || !within(uint64(v), containerWS, 8*MiB) {
		t.Errorf("/metrics/resource container_memory_working_set_bytes %v (present %v), cgroup %d", v, ok, containerWS)
	}
	for _, name := range []string{"pod_cpu_usage_seconds_total", "pod_memory_working_set_bytes", "node_cpu_usage_seconds_total", "node_memory_working_set_bytes", "container_start_time_seconds"} {
		if v, ok := metricValue(res, name); !ok || v <= 0 {
			t.Errorf("/metrics/resource %s = %v (present %v)", name, v, ok)
		}
	}
	if v, ok := metricValue(res, "resource_scrape_error"); !ok || v != 0 {
		t.Errorf("resource_scrape_error %v (present %v)", v, ok)
	}
	cad := n.scrape("/metrics/cadvisor")
	if v, ok := metricValue(cad, "container_memory_working_set_bytes", labels...); !ok || !within(uint64(v), containerWS, 8*MiB) {
		t.Errorf("/metrics/cadvisor container_memory_working_set_bytes %v (present %v), cgroup %d", v, ok, containerWS)
	}
	if v, ok := metricValue(cad, "container_cpu_usage_seconds_total", append(labels, "cpu=total")...); !ok || v <= 0 {
		t.Errorf("/metrics/cadvisor container_cpu_usage_seconds_total %v (present %v)", v, ok)
	}

	// nodectl reads the same.
	out, err := n.nodectl("top", "pods")
	t.Logf("nodectl top pods:\n%s", out)
	if err != nil || !strings.Contains(out, pod.Name) || !strings.Contains(out, "Mi") {
		t.Errorf("nodectl top pods: %v\n%s", err, out)
	}
	// The pod's working set, as the cgroup counts it: the hog's 64 MiB, its
	// emptyDir's 4 MiB when that is on a tmpfs (the VM lane's), and on v2
	// the kernel memory charged to it.
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) == 4 && f[1] == pod.Name {
			mi, _ := strconv.Atoi(strings.TrimSuffix(f[3], "Mi"))
			if ws := int(podWS / MiB); mi < 63 || mi < ws-2 || mi > ws+2 || !strings.HasSuffix(f[2], "m") {
				t.Errorf("nodectl top pods line %q: want at least the hog's 64Mi, within 2Mi of the cgroup's %d Mi, and millicores", line, ws)
			}
		}
	}
	if out, err := n.nodectl("top", "node"); err != nil || !strings.Contains(out, n.name) || !strings.Contains(out, "%") {
		t.Errorf("nodectl top node: %v\n%s", err, out)
	}
	out, err = n.nodectl("cgroups")
	t.Logf("nodectl cgroups:\n%s", out)
	if err != nil || !strings.Contains(out, "default/"+pod.Name) || !strings.Contains(out, "256.0Mi") || !strings.Contains(out, "burstable") {
		t.Errorf("nodectl cgroups: %v\n%s", err, out)
	}
	if out, err := n.nodectl("get", "node", "-o", "wide"); err != nil || !strings.Contains(out, fmt.Sprintf("v%d/cgroupfs", cgroupManager(t).Version())) {
		t.Errorf("nodectl get node: %v\n%s", err, out)
	}

	resp, err := http.Get(n.url("/healthz?verbose"))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	want := "[+]runtime ok\n[+]pleg ok\n[+]cgroups ok\n[+]eviction ok\nhealthz check passed\n"
	if resp.StatusCode != 200 || string(body) != want {
		t.Errorf("/healthz?verbose: %d %q, want %q", resp.StatusCode, body, want)
	}
}

func usedBytes(v *statsapi.VolumeStats) any {
	if v == nil || v.UsedBytes == nil {
		return nil
	}
	return *v.UsedBytes
}
