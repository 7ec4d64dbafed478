package main

import (
	"fmt"
	"sort"
	"strings"
	"text/tabwriter"

	corev1 "k8s.io/api/core/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"nodeagent/api"
	"nodeagent/internal/bytesize"
)

// topPods prints each pod's CPU and memory from /stats/summary, in
// kubectl top's units (millicores, Mi).
func (c *client) topPods(containers bool) error {
	var s statsapi.Summary
	if err := c.fetch("/stats/summary", &s); err != nil {
		return err
	}
	sort.Slice(s.Pods, func(i, j int) bool {
		a, b := s.Pods[i].PodRef, s.Pods[j].PodRef
		return a.Namespace+"/"+a.Name < b.Namespace+"/"+b.Name
	})
	tw := tabwriter.NewWriter(c.out, 0, 8, 3, ' ', 0)
	if containers {
		fmt.Fprintln(tw, "POD\tNAME\tCPU(cores)\tMEMORY(bytes)")
		for _, p := range s.Pods {
			for _, ct := range p.Containers {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", p.PodRef.Name, ct.Name, cpuText(ct.CPU), memoryText(ct.Memory))
			}
		}
		return tw.Flush()
	}
	fmt.Fprintln(tw, "NAMESPACE\tNAME\tCPU(cores)\tMEMORY(bytes)")
	for _, p := range s.Pods {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", p.PodRef.Namespace, p.PodRef.Name, cpuText(p.CPU), memoryText(p.Memory))
	}
	return tw.Flush()
}

// topNode prints the node's CPU and memory use, and their share of its
// capacity, as kubectl top node does.
func (c *client) topNode() error {
	var s statsapi.Summary
	if err := c.fetch("/stats/summary", &s); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(c.out, 0, 8, 3, ' ', 0)
	fmt.Fprintln(tw, "NAME\tCPU(cores)\tCPU(%)\tMEMORY(bytes)\tMEMORY(%)")
	cpuPct, memPct := "<unknown>", "<unknown>"
	var node corev1.Node
	if err := c.fetch("/node", &node); err == nil {
		if q, ok := node.Status.Capacity[corev1.ResourceCPU]; ok && s.Node.CPU != nil && s.Node.CPU.UsageNanoCores != nil && q.MilliValue() > 0 {
			cpuPct = fmt.Sprintf("%d%%", int64(*s.Node.CPU.UsageNanoCores)/1e6*100/q.MilliValue())
		}
		if q, ok := node.Status.Capacity[corev1.ResourceMemory]; ok && s.Node.Memory != nil && s.Node.Memory.WorkingSetBytes != nil && q.Value() > 0 {
			memPct = fmt.Sprintf("%d%%", int64(*s.Node.Memory.WorkingSetBytes)*100/q.Value())
		}
	}
	fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", s.Node.NodeName, cpuText(s.Node.CPU), cpuPct, memoryText(s.Node.Memory), memPct)
	return tw.Flush()
}

// cpuText is the CPU rate in millicores; <unknown> until the agent has two
// readings (it samples every 10 s).
func cpuText(c *statsapi.CPUStats) string {
	if c == nil || c.UsageNanoCores == nil {
		return "<unknown>"
	}
	return fmt.Sprintf("%dm", *c.UsageNanoCores/1e6)
}

// memoryText is the working set in Mi, what kubectl top shows.
func memoryText(m *statsapi.MemoryStats) string {
	if m == nil || m.WorkingSetBytes == nil {
		return "<unknown>"
	}
	return fmt.Sprintf("%dMi", *m.WorkingSetBytes/(1<<20))
}

// cgroups prints the QoS cgroup tree with each cgroup's limits and usage.
func (c *client) cgroups(output string) error {
	var entries []api.CgroupEntry
	if err := c.fetch("/cgroups", &entries); err != nil {
		return err
	}
	if output == "json" || output == "yaml" {
		return emit(c.out, output, entries)
	}
	tw := tabwriter.NewWriter(c.out, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "CGROUP\tPOD\tQOS\tCPU SHARES\tCPU QUOTA\tMEMORY LIMIT\tMEMORY\tWORKING SET\tPIDS")
	for _, e := range entries {
		name := e.Name
		if e.Depth > 0 {
			name = strings.Repeat("  ", e.Depth) + name[strings.LastIndexByte(name, '/')+1:]
		}
		shares := fmt.Sprint(e.CPUShares)
		if e.CPUWeight > 0 {
			shares = fmt.Sprintf("weight %d", e.CPUWeight)
		}
		quota := "max"
		if e.CPUQuota >= 0 {
			quota = fmt.Sprintf("%dm", e.CPUQuota*1000/int64(max(e.CPUPeriod, 1)))
		}
		limit := "max"
		if e.MemoryLimit >= 0 {
			limit = bytesize.Binary(uint64(e.MemoryLimit))
		}
		pids := fmt.Sprint(e.Pids)
		if e.PidsLimit >= 0 {
			pids += fmt.Sprintf("/%d", e.PidsLimit)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", name, orNone(e.Pod), orNone(e.QOS), shares, quota, limit,
			bytesize.Binary(e.Memory), bytesize.Binary(e.WorkingSet), pids)
	}
	return tw.Flush()
}
