package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"

	"nodeagent/e2e/bench/benchkit"
)

// peerResult is the kubelet's turn: the same pods and probes, watched as
// long.
type peerResult struct {
	cpu      float64 // cores
	rss      []int64 // sorted
	runs     float64
	mean     float64 // seconds
	restarts int
}

// kubeletSide runs the same probed pods on the kubelet and watches it
// probe them; nil when no kubelet could start.
func kubeletSide() *peerResult {
	k := benchkit.StartKubelet(*kubeletBin, *runtimeBin, env.Image, "bench-probes-kubelet-"+fmt.Sprint(time.Now().Unix()), "", "")
	if k == nil {
		return nil
	}
	defer k.Close()
	benchkit.Progress(fmt.Sprintf("kubelet: starting the same %d pods", *pods))
	for i := 0; i < *pods; i++ {
		k.Write(fmt.Sprintf("probed-%d", i), probedPod(fmt.Sprintf("probed-%d", i)))
	}
	kubeletReady(k)
	benchkit.Progress(fmt.Sprintf("watching the kubelet probe %d pods for %s", *pods, *watch))
	scrape := func() benchkit.Metrics {
		m, err := benchkit.Scrape(k.ReadOnlyURL("/metrics/probes", 0))
		benchkit.Check(err)
		return m
	}
	before := scrape()
	rss, cpu := k.Watch(*watch)
	after := scrape()
	sort.Slice(rss, func(i, j int) bool { return rss[i] < rss[j] })
	r := &peerResult{cpu: cpu.Seconds() / watch.Seconds(), rss: rss,
		runs: after.Sum("prober_probe_total") - before.Sum("prober_probe_total"),
		mean: mean(after, before, "prober_probe_duration_seconds")}
	for _, p := range kubeletPods(k).Items {
		for _, cs := range p.Status.ContainerStatuses {
			r.restarts += int(cs.RestartCount)
		}
	}
	benchkit.Progress("kubelet: removing the pods")
	k.RemoveAll()
	return r
}

func kubeletPods(k *benchkit.Kubelet) *corev1.PodList {
	resp, err := http.Get(k.ReadOnlyURL("/pods", 0))
	benchkit.Check(err)
	defer resp.Body.Close()
	var list corev1.PodList
	benchkit.Check(json.NewDecoder(resp.Body).Decode(&list))
	return &list
}

// kubeletReady waits until the kubelet reports every pod Ready.
func kubeletReady(k *benchkit.Kubelet) {
	for deadline := time.Now().Add(10 * time.Minute); time.Now().Before(deadline); time.Sleep(time.Second) {
		ready := 0
		for _, p := range kubeletPods(k).Items {
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
					ready++
				}
			}
		}
		if ready == *pods {
			return
		}
	}
	benchkit.Fail("the kubelet's pods were not ready within 10 minutes; log: " + k.LogPath())
}
