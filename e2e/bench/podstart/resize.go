package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"nodeagent/cri"
)

var resizes = flag.Int("resizes", 100, "in-place resizes per side in API mode, spread over the batch of 30 (0 skips them)")

// resizeTimes are one side's in-place resizes: the patch accepted -> the
// container's CFS quota in its cgroup file, and -> the API status showing
// the new limit.
type resizeTimes struct{ cgroup, status []time.Duration }

// resizeAll resizes the running pods named prefix0..prefix(size-1) on one
// node, count times round robin, their CPU limit going 200m, 300m, 200m...
// Each resize is timed alone: the next starts once the status showed it.
func (n *apiNode) resizeAll(ctx context.Context, prefix string, size, count int, rt *cri.Client, labels map[string]string) resizeTimes {
	ids := map[string]string{} // pod name -> container ID
	cs, err := rt.ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: labels, State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}})
	check(err)
	for _, c := range cs {
		ids[c.Labels[cri.LabelPodName]] = c.Id
	}
	quotaFiles := map[string]string{}
	var out resizeTimes
	for i := range count {
		name := prefix + strconv.Itoa(i%size)
		if quotaFiles[name] == "" {
			quotaFiles[name] = cpuQuotaFile(ids[name])
		}
		milli := 200 + 100*((i/size)%2)
		patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"containers": []any{map[string]any{
			"name": "main", "resources": map[string]any{"limits": map[string]string{"cpu": fmt.Sprintf("%dm", milli), "memory": "64Mi"}}}}}})
		p, err := n.client.CoreV1().Pods(n.ns).Patch(ctx, name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "resize")
		check(err)
		accepted := time.Now()
		w, err := n.client.CoreV1().Pods(n.ns).Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String(), ResourceVersion: p.ResourceVersion})
		check(err)
		want := int64(milli) * 100
		for end := accepted.Add(30 * time.Second); ; time.Sleep(time.Millisecond) {
			if quota(quotaFiles[name]) == want {
				out.cgroup = append(out.cgroup, time.Since(accepted))
				break
			}
			if time.Now().After(end) {
				fail(fmt.Sprintf("resize %d of %s: the cgroup file %s shows no quota of %d within 30 s", i, name, quotaFiles[name], want))
			}
		}
		if !statusShows(w, p, milli) {
			fail(fmt.Sprintf("resize %d of %s: the status never showed cpu %dm", i, name, milli))
		}
		out.status = append(out.status, time.Since(accepted))
		w.Stop()
	}
	return out
}

// statusShows waits on w, up to 30 s, for the pod's status to show the
// container's new CPU limit with no resize in progress.
func statusShows(w watch.Interface, p *corev1.Pod, milli int) bool {
	done := func(p *corev1.Pod) bool {
		if p.Status.ObservedGeneration < p.Generation || len(p.Status.ContainerStatuses) == 0 {
			return false
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodResizePending || c.Type == corev1.PodResizeInProgress {
				return false
			}
		}
		r := p.Status.ContainerStatuses[0].Resources
		return r != nil && r.Limits.Cpu().MilliValue() == int64(milli)
	}
	if done(p) {
		return true
	}
	timeout := time.After(30 * time.Second)
	for {
		select {
		case e, ok := <-w.ResultChan():
			if !ok {
				return false
			}
			if got, isPod := e.Object.(*corev1.Pod); isPod && done(got) {
				return true
			}
		case <-timeout:
			return false
		}
	}
}

// cpuQuotaFile finds a container's CFS quota file by its ID (the name of
// its cgroup), wherever its node's cgroup root is: cgroup v1's cpu
// hierarchy, or v2.
func cpuQuotaFile(id string) string {
	root, file := "/sys/fs/cgroup/cpu", "cpu.cfs_quota_us"
	if _, err := os.Stat(root); err != nil {
		root, file = "/sys/fs/cgroup", "cpu.max"
	}
	found := ""
	filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		switch {
		case err != nil || !d.IsDir():
			return nil
		case d.Name() == id:
			found = filepath.Join(path, file)
			return filepath.SkipAll
		case strings.Count(strings.TrimPrefix(path, root), "/") > 6:
			return filepath.SkipDir
		}
		return nil
	})
	if found == "" {
		fail("no cgroup of container " + id + " under " + root)
	}
	return found
}

// quota reads a CFS quota file (v1 cpu.cfs_quota_us, v2 cpu.max); -1
// when unlimited or unreadable.
func quota(file string) int64 {
	b, err := os.ReadFile(file)
	if err != nil {
		return -1
	}
	q, err := strconv.ParseInt(strings.Fields(string(b))[0], 10, 64)
	if err != nil {
		return -1
	}
	return q
}

func printResizes(agent, kubelet *resizeTimes) {
	if agent == nil {
		return
	}
	fmt.Println()
	fmt.Printf("In-place resize at 30 running pods, one at a time: the patch accepted -> the container's CFS quota in its cgroup file,\n")
	fmt.Printf("and -> the API status showing it (targets p99 <= 100 ms to the cgroup, <= 250 ms to the status)\n")
	fmt.Printf("%-28s %5s %9s %9s %9s %11s %11s\n", "side", "n", "cgroup p50", "p99", "max", "status p50", "status p99")
	row := func(name string, r *resizeTimes) {
		fmt.Printf("%-28s %5d %9s %9s %9s %11s %11s\n", name, len(r.cgroup), pct(r.cgroup, 50), pct(r.cgroup, 99), pct(r.cgroup, 100), pct(r.status, 50), pct(r.status, 99))
	}
	row("nodeagent", agent)
	if kubelet != nil {
		row("kubelet", kubelet)
		fmt.Printf("  nodeagent / kubelet: cgroup p50 %.2f, p99 %.2f; status p50 %.2f, p99 %.2f\n",
			float64(pctD(agent.cgroup, 50))/float64(pctD(kubelet.cgroup, 50)), float64(pctD(agent.cgroup, 99))/float64(pctD(kubelet.cgroup, 99)),
			float64(pctD(agent.status, 50))/float64(pctD(kubelet.status, 50)), float64(pctD(agent.status, 99))/float64(pctD(kubelet.status, 99)))
	}
}
