package main

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/duration"

	"nodeagent/api"
	"nodeagent/internal/cli"
)

// getTypes are the resource types get takes, with kubectl's short names.
var getTypes = map[string][]string{
	"pods":      {"pod", "po"},
	"node":      {"nodes", "no"},
	"evictions": {"eviction"},
}

type getOptions struct {
	output   string
	selector string
	watch    bool
}

func newGetCommand(newClient func() *client) *cobra.Command {
	o := &getOptions{}
	cmd := &cobra.Command{
		Use:   "get (pods [NAME...] | node | evictions) [-o FORMAT] [-l SELECTOR] [-w]",
		Short: "Display pods, the node, or the agent's eviction decisions",
		Long: `Display pods, the node, or the agent's eviction decisions, as kubectl get does.

Pods print as kubectl prints them (NAME, READY, STATUS, RESTARTS, AGE; -o wide adds IP,
NODE and the QoS class). Evictions are the last decisions of the eviction manager: signal,
threshold, victims and timings (-o json or yaml only).`,
		Example: `  # The pods, and one of them as YAML
  nodectl get pods
  nodectl get pod web -o yaml

  # Names only, or a field of each
  nodectl get pods -o name
  nodectl get pods -o jsonpath='{range .items[*]}{.metadata.name}{"\t"}{.status.podIP}{"\n"}{end}'
  nodectl get pods -o custom-columns=NAME:.metadata.name,QOS:.status.qosClass

  # Pods with a label, watched as they change
  nodectl get pods -l app=web -w`,
		Args:              cobra.MinimumNArgs(1),
		ValidArgsFunction: completeTypeThenPods(newClient, getTypes),
		RunE: func(cmd *cobra.Command, args []string) error {
			kind, names, err := resourceArgs(args, getTypes, 100)
			if err != nil {
				return err
			}
			c := newClient()
			switch kind {
			case "pods":
				out, err := parseOutput(o.output)
				if err != nil {
					return err
				}
				sel, err := parseSelector(o.selector)
				if err != nil {
					return err
				}
				return c.getPods(names, sel, out, o.watch)
			case "node":
				if o.watch || o.selector != "" {
					return cli.UsageError("get node takes neither -w nor -l")
				}
				out, err := parseOutput(o.output)
				if err != nil {
					return err
				}
				return c.getNode(out)
			default:
				if o.watch || o.selector != "" || len(names) > 0 {
					return cli.UsageError("get evictions takes no names, -w or -l")
				}
				if _, err := parseOutput(o.output, "json", "yaml"); err != nil {
					return err
				}
				return c.getEvictions(o.output)
			}
		},
	}
	cmd.Flags().StringVarP(&o.output, "output", "o", "", "output format: "+strings.Join(objectFormats, ", "))
	cmd.Flags().StringVarP(&o.selector, "selector", "l", "", "label selector (=, ==, !=, in, notin, exists), e.g. -l app=web,tier!=db")
	cmd.Flags().BoolVarP(&o.watch, "watch", "w", false, "after listing, watch for changes (the agent is polled every second)")
	mustFlag(cmd.RegisterFlagCompletionFunc("output", completeOutput))
	return cmd
}

// parseSelector reads -l before any call.
func parseSelector(s string) (labels.Selector, error) {
	if s == "" {
		return labels.Everything(), nil
	}
	sel, err := labels.Parse(s)
	if err != nil {
		return nil, cli.UsageError(fmt.Sprintf("-l %q: %v", s, err))
	}
	return sel, nil
}

// selectPods resolves names (each must exist) and the selector.
func (c *client) selectPods(names []string, sel labels.Selector) ([]corev1.Pod, error) {
	pods, err := c.pods()
	if err != nil {
		return nil, err
	}
	if len(names) > 0 {
		var out []corev1.Pod
		for _, n := range names {
			p, err := findIn(pods, n)
			if err != nil {
				return nil, err
			}
			out = append(out, *p)
		}
		pods = out
	}
	var out []corev1.Pod
	for _, p := range pods {
		if sel.Matches(labels.Set(p.Labels)) {
			out = append(out, p)
		}
	}
	if len(names) == 0 {
		sort.SliceStable(out, func(i, j int) bool { return out[i].Namespace+"/"+out[i].Name < out[j].Namespace+"/"+out[j].Name })
	}
	return out, nil
}

func (c *client) getPods(names []string, sel labels.Selector, o output, watch bool) error {
	pods, err := c.selectPods(names, sel)
	if err != nil {
		return err
	}
	if err := c.printPods(pods, names, o); err != nil || !watch {
		return err
	}
	return c.watchPods(names, sel, o, pods)
}

// printPods prints pods in the table or as objects: one named pod is
// printed as a Pod, anything else as a List, as kubectl does.
func (c *client) printPods(pods []corev1.Pod, names []string, o output) error {
	if !o.table() {
		for i := range pods {
			pods[i].TypeMeta = typeMeta("Pod")
		}
		if len(names) == 1 && len(pods) == 1 {
			return o.print(&pods[0], c.out)
		}
		return o.print(&corev1.PodList{TypeMeta: typeMeta("List"), Items: pods}, c.out)
	}
	if len(pods) == 0 {
		fmt.Fprintln(c.errOut, "No resources found.")
		return nil
	}
	tw := tabwriter.NewWriter(c.out, 0, 8, 3, ' ', 0)
	fmt.Fprintln(tw, strings.Join(podHeader(o.format == "wide"), "\t"))
	now := time.Now()
	for i := range pods {
		fmt.Fprintln(tw, strings.Join(podRow(&pods[i], o.format == "wide", now), "\t"))
	}
	return tw.Flush()
}

// watchPods polls the agent and prints each pod again when what would be
// printed changed; a pod that is gone is printed once more as Terminated.
func (c *client) watchPods(names []string, sel labels.Selector, o output, seen []corev1.Pod) error {
	last := map[string]string{}
	key := func(p *corev1.Pod) string { return p.Namespace + "/" + p.Name }
	shown := func(p *corev1.Pod) string {
		if o.table() {
			return strings.Join(podRow(p, o.format == "wide", time.Time{}), "\t")
		}
		return p.ResourceVersion + fmt.Sprint(p.Status)
	}
	for i := range seen {
		last[key(&seen[i])] = shown(&seen[i])
	}
	return pollEverySecond(func() error {
		pods, err := c.selectPods(nil, sel)
		if err != nil {
			fmt.Fprintf(c.errOut, "nodectl: watch: %v\n", err)
			return nil
		}
		now := time.Now()
		present := map[string]bool{}
		tw := tabwriter.NewWriter(c.out, 0, 8, 3, ' ', 0)
		for i := range pods {
			p := &pods[i]
			if len(names) > 0 && !matchesAny(p, names) {
				continue
			}
			present[key(p)] = true
			if s := shown(p); last[key(p)] != s {
				last[key(p)] = s
				if err := c.printWatched(tw, p, o, now); err != nil {
					return err
				}
			}
		}
		for k := range last {
			if !present[k] {
				delete(last, k)
				if o.table() {
					ns, name, _ := strings.Cut(k, "/")
					gone := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Status: corev1.PodStatus{Reason: "Terminated"}}
					fmt.Fprintln(tw, strings.Join(podRow(&gone, o.format == "wide", now), "\t"))
				}
			}
		}
		return tw.Flush()
	})
}

func (c *client) printWatched(tw io.Writer, p *corev1.Pod, o output, now time.Time) error {
	if o.table() {
		_, err := fmt.Fprintln(tw, strings.Join(podRow(p, o.format == "wide", now), "\t"))
		return err
	}
	p.TypeMeta = typeMeta("Pod")
	return o.print(p, c.out)
}

func matchesAny(p *corev1.Pod, names []string) bool {
	for _, n := range names {
		if podMatches(p, n) {
			return true
		}
	}
	return false
}

func podHeader(wide bool) []string {
	h := []string{"NAME", "READY", "STATUS", "RESTARTS", "AGE"}
	if wide {
		h = append(h, "IP", "NODE", "NOMINATED NODE", "READINESS GATES", "QOS")
	}
	return h
}

// podRow is a pod as kubectl get pods prints it.
func podRow(p *corev1.Pod, wide bool, now time.Time) []string {
	ready, total, restarts := 0, len(p.Spec.Containers), int32(0)
	var lastRestart time.Time
	for _, c := range p.Spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			total++ // a sidecar counts as kubectl counts it
		}
	}
	count := func(cs corev1.ContainerStatus) {
		restarts += cs.RestartCount
		if t := cs.LastTerminationState.Terminated; t != nil && t.FinishedAt.After(lastRestart) {
			lastRestart = t.FinishedAt.Time
		}
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Ready {
			ready++
		}
		count(cs)
	}
	for _, cs := range p.Status.InitContainerStatuses {
		if cs.Ready && cs.Started != nil && *cs.Started {
			ready++
		}
		count(cs)
	}
	restartText := fmt.Sprint(restarts)
	if restarts > 0 && !lastRestart.IsZero() && !now.IsZero() {
		restartText = fmt.Sprintf("%d (%s ago)", restarts, duration.HumanDuration(now.Sub(lastRestart)))
	}
	row := []string{p.Name, fmt.Sprintf("%d/%d", ready, total), podStatusWord(p), restartText, podAge(p, now)}
	if wide {
		gates := "<none>"
		if n := len(p.Spec.ReadinessGates); n > 0 {
			gates = fmt.Sprintf("%d", n)
		}
		row = append(row, orNone(p.Status.PodIP), orNone(p.Spec.NodeName), orNone(p.Status.NominatedNodeName), gates, orNone(string(p.Status.QOSClass)))
	}
	return row
}

// podAge is AGE: since the pod was created (the API's pods), else since it
// started on the node (static pods).
func podAge(p *corev1.Pod, now time.Time) string {
	if now.IsZero() {
		return ""
	}
	if !p.CreationTimestamp.IsZero() {
		return ageText(&p.CreationTimestamp, now)
	}
	return ageText(p.Status.StartTime, now)
}

// ageText is kubectl's age: apimachinery's HumanDuration ("5h3m").
func ageText(t *metav1.Time, now time.Time) string {
	if t == nil || t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t.Time))
}

func (c *client) getNode(o output) error {
	var n corev1.Node
	if err := c.fetch("/node", &n); err != nil {
		return err
	}
	if !o.table() {
		n.TypeMeta = typeMeta("Node")
		return o.print(&n, c.out)
	}
	tw := tabwriter.NewWriter(c.out, 0, 8, 3, ' ', 0)
	header := "NAME\tSTATUS\tROLES\tAGE\tVERSION"
	if o.format == "wide" {
		header += "\tINTERNAL-IP\tOS-IMAGE\tKERNEL-VERSION\tCONTAINER-RUNTIME\tCGROUPS\tSHARED-CPUS"
	}
	fmt.Fprintln(tw, header)
	row := []string{n.Name, nodeReadyWord(&n), nodeRoles(&n), ageText(&n.CreationTimestamp, time.Now()), n.Status.NodeInfo.KubeletVersion}
	if o.format == "wide" {
		ip := "<none>"
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP {
				ip = a.Address
			}
		}
		// The CPU manager's shared pool: <none> under policy none.
		var cpus api.CPUManager
		shared := "<unknown>"
		if c.fetch("/cpus", &cpus) == nil {
			shared = orNone(cpus.SharedPool)
		}
		row = append(row, ip, n.Status.NodeInfo.OSImage, n.Status.NodeInfo.KernelVersion, n.Status.NodeInfo.ContainerRuntimeVersion, cgroupsText(&n), shared)
	}
	fmt.Fprintln(tw, strings.Join(row, "\t"))
	return tw.Flush()
}

// nodeRoles is kubectl's ROLES: node-role.kubernetes.io/<role> labels.
func nodeRoles(n *corev1.Node) string {
	var roles []string
	for k := range n.Labels {
		if role, ok := strings.CutPrefix(k, "node-role.kubernetes.io/"); ok && role != "" {
			roles = append(roles, role)
		}
	}
	if len(roles) == 0 {
		return "<none>"
	}
	sort.Strings(roles)
	return strings.Join(roles, ",")
}
