package main

import (
	"context"
	"fmt"
	"sort"
	"time"

	"nodeagent/e2e/bench/benchkit"
)

// footprint is one side's memory and CPU with no pods and with the batch
// idle.
type footprint struct {
	emptyRSS            int64
	emptyHeap, emptyCPU float64 // bytes; cores
	rss                 []int64 // sampled each second, sorted
	anon, file          int64   // at the end of the idle
	heap, cpu           float64
	measured            bool
}

type watcher func(time.Duration) ([]int64, time.Duration)

func (f *footprint) empty(watch watcher, pid int, heap func() float64) {
	_, cpu := watch(emptyIdle)
	f.emptyCPU = cpu.Seconds() / emptyIdle.Seconds()
	f.emptyRSS, f.emptyHeap, f.measured = benchkit.RSS(pid), heap(), true
}

func (f *footprint) idle(watch watcher, pid int, heap func() float64) {
	rss, cpu := watch(*idle)
	sort.Slice(rss, func(i, j int) bool { return rss[i] < rss[j] })
	f.rss, f.cpu = rss, cpu.Seconds()/idle.Seconds()
	f.anon, f.file = benchkit.RSSParts(pid)
	f.heap = heap()
}

// kubeletBatchAndIdle is the kubelet's turn at the batch and the idle
// watch, as nodeagent's.
func kubeletBatchAndIdle(ctx context.Context, k *benchkit.Kubelet, f *footprint) []time.Duration {
	progress(fmt.Sprintf("kubelet: a batch of %d pods", *batch))
	var names []string
	t0 := time.Now()
	for i := 0; i < *batch; i++ {
		name := fmt.Sprintf("batch-%d", i)
		names = append(names, name)
		k.Write(name, podManifest(name))
	}
	d, _ := k.WaitStarted(ctx, names, t0)
	progress(fmt.Sprintf("kubelet: %d pods idle for %s", *batch, *idle))
	f.idle(k.Watch, k.Pid(), k.HeapInUse)
	progress("kubelet: removing the pods")
	k.RemoveAll()
	return d
}

// printFootprints is the footprint table: nodeagent, the kubelet when it
// ran, and their ratio.
func printFootprints(a, k footprint) {
	fmt.Printf("Footprint: no pods (%s), then %d pods idle (%s); targets for nodeagent RSS <= 30 MiB and <= half the kubelet's, CPU <= 0.01 core\n",
		emptyIdle, *batch, *idle)
	fmt.Printf("  %-34s %10s %10s %8s\n", "", "nodeagent", "kubelet", "ratio")
	line := func(name string, av, kv float64, format string) {
		ks, r := "-", "-"
		if k.measured && kv > 0 {
			ks, r = fmt.Sprintf(format, kv), fmt.Sprintf("%.2f", av/kv)
		}
		fmt.Printf("  %-34s %10s %10s %8s\n", name, fmt.Sprintf(format, av), ks, r)
	}
	med := func(f footprint) float64 {
		if len(f.rss) == 0 {
			return 0
		}
		return mib(f.rss[len(f.rss)/2])
	}
	line("RSS, no pods (MiB)", mib(a.emptyRSS), mib(k.emptyRSS), "%.1f")
	line("Go heap in use, no pods (MiB)", a.emptyHeap/(1<<20), k.emptyHeap/(1<<20), "%.1f")
	line("CPU, no pods (cores)", a.emptyCPU, k.emptyCPU, "%.4f")
	line(fmt.Sprintf("RSS p50, %d pods (MiB)", *batch), med(a), med(k), "%.1f")
	line("  anonymous at the end (MiB)", mib(a.anon), mib(k.anon), "%.1f")
	line("  the binary's pages (MiB)", mib(a.file), mib(k.file), "%.1f")
	line(fmt.Sprintf("Go heap in use, %d pods (MiB)", *batch), a.heap/(1<<20), k.heap/(1<<20), "%.1f")
	line(fmt.Sprintf("CPU, %d pods (cores)", *batch), a.cpu, k.cpu, "%.4f")
	perPod := func(f footprint) float64 {
		if len(f.rss) == 0 {
			return 0
		}
		return float64(f.rss[len(f.rss)-1]-f.emptyRSS) / 1024 / float64(*batch)
	}
	line("RSS per pod (KiB)", perPod(a), perPod(k), "%.1f")
	line("Go heap per pod (KiB)", (a.heap-a.emptyHeap)/1024/float64(*batch), (k.heap-k.emptyHeap)/1024/float64(*batch), "%.1f")
}
