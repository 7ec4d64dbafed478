package experiment

import (
	"fmt"
	"html"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
)

// Plot is memory.svg: per run a panel of memory over time (the node's and
// all pods' working sets, and each pod's), the pods' allocatable and the
// eviction threshold as dashed lines, and markers where the agent evicted
// (triangles) and the kernel OOM-killed (crosses). Plain SVG, readable in
// any browser.
func Plot(s *Scenario, runs []Run) string {
	const (
		width, panelH          = 960, 300
		left, right, top       = 70, 200, 30
		bottom                 = 40
		plotW, plotH           = width - left - right, panelH - top - bottom
		mib              int64 = 1 << 20
	)
	colors := []string{"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"}
	allocatable, threshold := lines(s)
	var b strings.Builder
	height := panelH * max(len(runs), 1)
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="11">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<title>%s: memory over time</title>`+"\n", html.EscapeString(s.Name))
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", width, height)
	for i, r := range runs {
		y0 := i * panelH
		// Series: node, all pods, and each pod, by name.
		series := map[string][][2]float64{}
		var names []string
		var maxY int64 = allocatable
		for _, smp := range r.Samples {
			series["node working set"] = append(series["node working set"], [2]float64{smp.T, float64(smp.NodeWorkingSet)})
			series["all pods"] = append(series["all pods"], [2]float64{smp.T, float64(smp.PodsWorkingSet)})
			maxY = max(maxY, smp.NodeWorkingSet, smp.PodsWorkingSet)
			for name, ps := range smp.Pods {
				if _, ok := series[name]; !ok {
					names = append(names, name)
				}
				series[name] = append(series[name], [2]float64{smp.T, float64(ps.WorkingSet)})
			}
		}
		sort.Strings(names)
		names = append([]string{"node working set", "all pods"}, names...)
		maxY = max(maxY, 64*mib) * 11 / 10
		maxT := s.Duration.Seconds()
		x := func(t float64) float64 { return left + t/maxT*plotW }
		y := func(v float64) float64 { return float64(y0+top) + plotH - v/float64(maxY)*plotH }
		if r.Label != "" { // compare's panels: runs of several results
			fmt.Fprintf(&b, `<g id="panel-%d">`+"\n", i+1)
		} else {
			fmt.Fprintf(&b, `<g id="run-%d">`+"\n", r.Index)
		}
		title := fmt.Sprintf("run %d", r.Index)
		if r.Label != "" {
			title = r.Label
		}
		fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="13" font-weight="bold">%s</text>`+"\n", left, y0+18, html.EscapeString(title))
		// Axes, with a grid line every fifth of the range.
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#333"/>`+"\n", left, y0+top, plotW, plotH)
		for k := 0; k <= 5; k++ {
			v := float64(maxY) * float64(k) / 5
			fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#ddd"/><text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n",
				left, left+plotW, y(v), y(v), left-4, y(v)+4, quantityMiB(int64(v)))
			t := maxT * float64(k) / 5
			fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%.1fs</text>`+"\n", x(t), y0+top+plotH+14, t)
		}
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">time since the pods were applied</text>`+"\n", left+plotW/2, y0+top+plotH+30)
		for _, l := range []struct {
			name  string
			value int64
			color string
		}{{"pods allocatable", allocatable, "#555"}, {"eviction threshold", threshold, "#d62728"}} {
			if l.value <= 0 {
				continue
			}
			fmt.Fprintf(&b, `<line class="threshold" x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="%s" stroke-dasharray="6 4"/><text x="%d" y="%.1f" fill="%s">%s %s</text>`+"\n",
				left, left+plotW, y(float64(l.value)), y(float64(l.value)), l.color, left+plotW+4, y(float64(l.value))+4, l.color, l.name, quantityMiB(l.value))
		}
		for k, name := range names {
			pts := series[name]
			color := colors[k%len(colors)]
			var path strings.Builder
			for _, p := range pts {
				fmt.Fprintf(&path, "%.1f,%.1f ", x(p[0]), y(p[1]))
			}
			fmt.Fprintf(&b, `<polyline class="series" data-series="%s" fill="none" stroke="%s" stroke-width="1.5" points="%s"/>`+"\n", html.EscapeString(name), color, strings.TrimSpace(path.String()))
			fmt.Fprintf(&b, `<text x="%d" y="%d" fill="%s">%s</text>`+"\n", left+plotW+4, y0+top+12*k+80, color, html.EscapeString(name))
		}
		for _, e := range r.Events {
			px := x(e.T)
			py := y(float64(lastWorkingSet(r.Samples, e.Pod, e.T)))
			label := html.EscapeString(fmt.Sprintf("%s %s by the %s at %.2fs", e.Pod, e.Kind, e.By, e.T))
			if e.Kind == "eviction" {
				fmt.Fprintf(&b, `<path class="eviction" d="M%.1f,%.1f l-6,-10 h12 z" fill="#d62728"><title>%s</title></path>`+"\n", px, py, label)
			} else {
				fmt.Fprintf(&b, `<path class="oom-kill" d="M%.1f,%.1f m-5,-5 l10,10 m0,-10 l-10,10" stroke="black" stroke-width="2"><title>%s</title></path>`+"\n", px, py, label)
			}
		}
		fmt.Fprintf(&b, `<text x="%d" y="%d">▼ evicted by the agent   ✕ OOM-killed by the kernel</text>`+"\n", left+plotW+4, y0+top+plotH)
		b.WriteString("</g>\n")
	}
	b.WriteString("</svg>\n")
	return b.String()
}

// lines are the pods' allocatable memory and the working set at which the
// allocatableMemory.available hard threshold is met (0 when unknown).
func lines(s *Scenario) (allocatable, threshold int64) {
	if s.Agent.PodsMemory == nil {
		return 0, 0
	}
	allocatable = s.Agent.PodsMemory.Value()
	if v, ok := s.Agent.EvictionHard["allocatableMemory.available"]; ok {
		if q, err := resource.ParseQuantity(v); err == nil {
			threshold = allocatable - q.Value()
		}
	}
	return allocatable, threshold
}

// lastWorkingSet is a pod's last sampled working set at or before t.
func lastWorkingSet(samples []Sample, pod string, t float64) int64 {
	var ws int64
	for _, s := range samples {
		if s.T > t {
			break
		}
		if p, ok := s.Pods[pod]; ok {
			ws = p.WorkingSet
		}
	}
	return ws
}

func quantityMiB(b int64) string { return fmt.Sprintf("%d Mi", b>>20) }
