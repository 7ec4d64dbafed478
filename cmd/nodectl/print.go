package main

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"nodeagent/api"
)

// podStatusWord is the STATUS column as kubectl words it: the pod's reason,
// else the first container's waiting or terminated reason, else the phase.
func podStatusWord(p *corev1.Pod) string {
	if p.Status.Reason != "" {
		return p.Status.Reason
	}
	for _, cs := range p.Status.InitContainerStatuses {
		if t := cs.State.Terminated; t != nil && t.ExitCode == 0 {
			continue
		}
		if w := cs.State.Waiting; w != nil && w.Reason != "" && w.Reason != "PodInitializing" {
			return "Init:" + w.Reason
		}
		if t := cs.State.Terminated; t != nil {
			return "Init:" + t.Reason
		}
		if cs.State.Running != nil {
			return "Init:Running"
		}
	}
	word := string(p.Status.Phase)
	for _, cs := range p.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil && w.Reason != "" {
			return w.Reason
		}
		if t := cs.State.Terminated; t != nil && t.Reason != "" && p.Status.Phase != corev1.PodRunning {
			word = t.Reason
		}
	}
	return word
}

func nodeReadyWord(n *corev1.Node) string {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			if c.Status == corev1.ConditionTrue {
				return "Ready"
			}
			return "NotReady"
		}
	}
	return "Unknown"
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

// describePod prints a pod as kubectl describe does, with what the agent
// adds: its cgroup, its manifest and its probes' last runs.
func (c *client) describePod(p *corev1.Pod, shared describeShared) error {
	// The agent says where the pod's cgroup is: nodectl computes no path.
	cgroupPath := "<none: cgroupsPerQOS is off, or the pod has no cgroup yet>"
	if shared.cgroupsErr != nil {
		cgroupPath = "<unknown: " + shared.cgroupsErr.Error() + ">"
	}
	for _, e := range shared.cgroups {
		if e.PodUID == p.UID {
			cgroupPath = e.Name
		}
	}
	w := tabwriter.NewWriter(c.out, 0, 8, 1, ' ', 0)
	kv := func(k, v string) { fmt.Fprintf(w, "%s:\t%s\n", k, v) }
	kv("Name", p.Name)
	kv("Namespace", p.Namespace)
	kv("UID", string(p.UID))
	kv("Node", p.Spec.NodeName+"/"+p.Status.HostIP)
	if p.Status.StartTime != nil {
		kv("Start Time", p.Status.StartTime.Format(time.RFC1123Z))
	}
	if p.Spec.PriorityClassName != "" {
		kv("Priority Class Name", p.Spec.PriorityClassName)
	}
	if p.Spec.Priority != nil {
		kv("Priority", fmt.Sprint(*p.Spec.Priority))
	}
	kv("Service Account", orNone(p.Spec.ServiceAccountName))
	kv("Labels", mapText(p.Labels))
	kv("Annotations", mapText(p.Annotations))
	kv("Manifest", orNone(p.Annotations[api.AnnotationManifest]))
	kv("Status", podStatusWord(p))
	if p.Status.Reason != "" {
		kv("Reason", p.Status.Reason)
	}
	if p.Status.Message != "" {
		kv("Message", p.Status.Message)
	}
	kv("IP", orNone(p.Status.PodIP))
	kv("QoS Class", string(p.Status.QOSClass))
	if r := p.Spec.Resources; r != nil {
		kv("Pod Resources", "requests "+orNone(resourceText(r.Requests))+"; limits "+orNone(resourceText(r.Limits)))
	}
	for _, cond := range p.Status.Conditions {
		if cond.Type == corev1.PodResizePending || cond.Type == corev1.PodResizeInProgress {
			what := map[corev1.PodConditionType]string{corev1.PodResizePending: "pending", corev1.PodResizeInProgress: "in progress"}[cond.Type]
			if cond.Reason != "" {
				what += ", " + cond.Reason
			}
			if cond.Message != "" {
				what += ": " + cond.Message
			}
			kv("Resize", fmt.Sprintf("%s (generation %d)", what, cond.ObservedGeneration))
		}
	}
	kv("Cgroup", cgroupPath)
	kv("Restart Policy", string(p.Spec.RestartPolicy))
	if g := p.Spec.TerminationGracePeriodSeconds; g != nil {
		kv("Termination Grace", fmt.Sprintf("%ds", *g))
	}
	w.Flush()
	var reports []api.ProbeReport
	if err := c.fetch("/pods/"+p.Namespace+"/"+p.Name+"/probes", &reports); err != nil {
		fmt.Fprintf(c.errOut, "warning: probe results unavailable: %v\n", err)
	}
	exclusive := map[string]string{}
	for _, a := range shared.cpus.Exclusive {
		if a.PodUID == p.UID {
			exclusive[a.Container] = a.CPUs
		}
	}
	describeContainers(c.out, "Init Containers", p.Spec.InitContainers, p.Status.InitContainerStatuses, reports, exclusive)
	describeContainers(c.out, "Containers", p.Spec.Containers, p.Status.ContainerStatuses, reports, exclusive)
	describeContainers(c.out, "Ephemeral Containers", ephemeralAsContainers(p), p.Status.EphemeralContainerStatuses, reports, nil)
	if len(p.Status.Conditions) > 0 {
		fmt.Fprintln(c.out, "Conditions:")
		tw := tabwriter.NewWriter(c.out, 0, 8, 2, ' ', 0)
		fmt.Fprintln(tw, "  Type\tStatus\tReason")
		for _, cond := range p.Status.Conditions {
			fmt.Fprintf(tw, "  %s\t%s\t%s\n", cond.Type, cond.Status, cond.Reason)
		}
		tw.Flush()
	}
	describeVolumes(c.out, p.Spec.Volumes)
	tw := tabwriter.NewWriter(c.out, 0, 8, 1, ' ', 0)
	fmt.Fprintf(tw, "Node-Selectors:\t%s\n", mapText(p.Spec.NodeSelector))
	for i, t := range tolerationsText(p.Spec.Tolerations) {
		key := ""
		if i == 0 {
			key = "Tolerations:"
		}
		fmt.Fprintf(tw, "%s\t%s\n", key, t)
	}
	tw.Flush()
	mine := eventsOf(shared.events, p.UID)
	if len(mine) == 0 {
		fmt.Fprintln(c.out, "Events: <none>")
		return nil
	}
	fmt.Fprintln(c.out, "Events:")
	tw = tabwriter.NewWriter(c.out, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "  Type\tReason\tAge\tFrom\tMessage")
	now := time.Now()
	for _, e := range mine {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", e.Type, e.Reason, eventAge(&e, now), e.Source.Component, e.Message)
	}
	return tw.Flush()
}

// ephemeralAsContainers are the pod's ephemeral containers as containers
// (kubectl debug's), for describe and completion.
func ephemeralAsContainers(p *corev1.Pod) []corev1.Container {
	var out []corev1.Container
	for _, e := range p.Spec.EphemeralContainers {
		out = append(out, corev1.Container(e.EphemeralContainerCommon))
	}
	return out
}

// describeVolumes is kubectl's Volumes section, one line per source.
func describeVolumes(out io.Writer, volumes []corev1.Volume) {
	if len(volumes) == 0 {
		fmt.Fprintln(out, "Volumes: <none>")
		return
	}
	fmt.Fprintln(out, "Volumes:")
	for _, v := range volumes {
		fmt.Fprintf(out, "  %s:\n    %s\n", v.Name, volumeText(v.VolumeSource))
	}
}

func volumeText(v corev1.VolumeSource) string {
	switch {
	case v.EmptyDir != nil:
		s := "EmptyDir (a temporary directory that shares a pod's lifetime)"
		if v.EmptyDir.Medium != "" {
			s += ", medium " + string(v.EmptyDir.Medium)
		}
		if v.EmptyDir.SizeLimit != nil {
			s += ", size limit " + v.EmptyDir.SizeLimit.String()
		}
		return s
	case v.HostPath != nil:
		t := ""
		if v.HostPath.Type != nil {
			t = string(*v.HostPath.Type)
		}
		return fmt.Sprintf("HostPath (bare host directory volume) %s, type %q", v.HostPath.Path, t)
	case v.ConfigMap != nil:
		return "ConfigMap " + v.ConfigMap.Name
	case v.Secret != nil:
		return "Secret " + v.Secret.SecretName
	case v.Projected != nil:
		var parts []string
		for _, s := range v.Projected.Sources {
			switch {
			case s.ServiceAccountToken != nil:
				parts = append(parts, fmt.Sprintf("token (audience %q)", s.ServiceAccountToken.Audience))
			case s.ConfigMap != nil:
				parts = append(parts, "configMap "+s.ConfigMap.Name)
			case s.Secret != nil:
				parts = append(parts, "secret "+s.Secret.Name)
			case s.DownwardAPI != nil:
				parts = append(parts, "downwardAPI")
			}
		}
		return "Projected (" + strings.Join(parts, ", ") + ")"
	case v.DownwardAPI != nil:
		return "DownwardAPI"
	}
	return "<other source>"
}

// tolerationsText is kubectl's "key=value:Effect op=Exists for 300s", one
// line each.
func tolerationsText(ts []corev1.Toleration) []string {
	if len(ts) == 0 {
		return []string{"<none>"}
	}
	var parts []string
	for _, t := range ts {
		s := t.Key
		if t.Value != "" {
			s += "=" + t.Value
		}
		if t.Effect != "" {
			s += ":" + string(t.Effect)
		}
		if t.Operator == corev1.TolerationOpExists && t.Value == "" {
			if t.Key == "" {
				s = "op=Exists"
			} else {
				s += " op=Exists"
			}
		}
		if t.TolerationSeconds != nil {
			s += fmt.Sprintf(" for %ds", *t.TolerationSeconds)
		}
		parts = append(parts, s)
	}
	return parts
}

// eventAge is kubectl's "2m (x3 over 5m)".
func eventAge(e *corev1.Event, now time.Time) string {
	last := ageText(&e.LastTimestamp, now)
	if e.Count > 1 {
		return fmt.Sprintf("%s (x%d over %s)", last, e.Count, ageText(&e.FirstTimestamp, now))
	}
	return last
}

func (c *client) listEvents(podName, output string, watch bool) error {
	evs, err := c.podEvents(podName)
	if err != nil {
		return err
	}
	if output != "" {
		for i := range evs {
			evs[i].TypeMeta = typeMeta("Event")
		}
		if !watch {
			return emit(c.out, output, &corev1.EventList{TypeMeta: typeMeta("EventList"), Items: evs})
		}
	}
	if len(evs) == 0 && output == "" {
		fmt.Fprintln(c.errOut, "No events found.")
	}
	tw := tabwriter.NewWriter(c.out, 0, 8, 3, ' ', 0)
	if len(evs) > 0 && output == "" {
		fmt.Fprintln(tw, "LAST SEEN\tTYPE\tREASON\tOBJECT\tMESSAGE")
	}
	seen := map[string]int32{}
	print := func(evs []corev1.Event) error {
		now := time.Now()
		for i := range evs {
			e := &evs[i]
			key := string(e.UID) + "/" + e.Name
			if n, ok := seen[key]; ok && n == e.Count {
				continue
			}
			seen[key] = e.Count
			if output != "" {
				if err := emit(c.out, output, e); err != nil {
					return err
				}
				continue
			}
			obj := strings.ToLower(e.InvolvedObject.Kind) + "/" + e.InvolvedObject.Name
			if e.InvolvedObject.FieldPath != "" {
				obj += " " + e.InvolvedObject.FieldPath
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", eventAge(e, now), e.Type, e.Reason, obj, e.Message)
		}
		return tw.Flush()
	}
	if err := print(evs); err != nil || !watch {
		return err
	}
	return pollEverySecond(func() error {
		evs, err := c.podEvents(podName)
		if err != nil {
			fmt.Fprintf(c.errOut, "nodectl: watch: %v\n", err)
			return nil
		}
		return print(evs)
	})
}

// podEvents are the agent's events, or one pod's.
func (c *client) podEvents(podName string) ([]corev1.Event, error) {
	evs, err := c.events()
	if err != nil || podName == "" {
		return evs, err
	}
	p, err := c.findPod(podName)
	if err != nil {
		return nil, err
	}
	return eventsOf(evs, p.UID), nil
}

// eventsOf are the events about the object with uid.
func eventsOf(evs []corev1.Event, uid types.UID) []corev1.Event {
	var mine []corev1.Event
	for _, e := range evs {
		if e.InvolvedObject.UID == uid {
			mine = append(mine, e)
		}
	}
	return mine
}

// describeShared is what describe reads once for all the pods it
// describes: the cgroup tree and the events.
type describeShared struct {
	cgroups    []api.CgroupEntry
	cgroupsErr error // shown in the Cgroup line; describe goes on
	events     []corev1.Event
	cpus       api.CPUManager // zero from an agent without /cpus
}

func (c *client) describeShared() (describeShared, error) {
	var s describeShared
	s.cgroupsErr = c.fetch("/cgroups", &s.cgroups)
	_ = c.fetch("/cpus", &s.cpus) // an older agent has none: no line
	var err error
	s.events, err = c.events()
	return s, err
}

// describeContainers prints each container; exclusive are the CPUs the
// CPU manager gave containers to themselves, by name.
func describeContainers(out io.Writer, title string, specs []corev1.Container, statuses []corev1.ContainerStatus, reports []api.ProbeReport, exclusive map[string]string) {
	if len(specs) == 0 {
		return
	}
	fmt.Fprintf(out, "%s:\n", title)
	for _, s := range specs {
		var cs corev1.ContainerStatus
		for _, st := range statuses {
			if st.Name == s.Name {
				cs = st
			}
		}
		fmt.Fprintf(out, "  %s:\n", s.Name)
		w := tabwriter.NewWriter(out, 0, 8, 1, ' ', 0)
		kv := func(k, v string) { fmt.Fprintf(w, "    %s:\t%s\n", k, v) }
		kv("Container ID", orNone(cs.ContainerID))
		kv("Image", s.Image)
		kv("Image ID", orNone(cs.ImageID))
		if len(s.Command) > 0 {
			kv("Command", strings.Join(s.Command, " "))
		}
		if len(s.Args) > 0 {
			kv("Args", strings.Join(s.Args, " "))
		}
		for _, port := range s.Ports {
			kv("Port", fmt.Sprintf("%d/%s %s", port.ContainerPort, port.Protocol, port.Name))
		}
		for _, m := range s.VolumeMounts {
			mode := "rw"
			if m.ReadOnly {
				mode = "ro"
			}
			from := m.Name
			if m.SubPath != "" {
				from += fmt.Sprintf(" (path %q)", m.SubPath)
			}
			kv("Mount", fmt.Sprintf("%s from %s (%s)", m.MountPath, from, mode))
		}
		kv("State", stateText(cs.State))
		if cs.LastTerminationState != (corev1.ContainerState{}) {
			kv("Last State", stateText(cs.LastTerminationState))
		}
		kv("Ready", fmt.Sprint(cs.Ready))
		if cs.Started != nil {
			kv("Started", fmt.Sprint(*cs.Started))
		}
		kv("Restart Count", fmt.Sprint(cs.RestartCount))
		for _, pr := range []struct {
			kind api.ProbeKind
			spec *corev1.Probe
		}{{api.Liveness, s.LivenessProbe}, {api.Readiness, s.ReadinessProbe}, {api.Startup, s.StartupProbe}} {
			if pr.spec == nil {
				continue
			}
			kv(string(pr.kind), probeText(pr.spec))
			for _, r := range reports {
				if r.Container == s.Name && r.Type == pr.kind {
					kv("  Result", reportText(r))
				}
			}
		}
		if lc := s.Lifecycle; lc != nil {
			if lc.PostStart != nil {
				kv("PostStart", handlerText(lc.PostStart))
			}
			if lc.PreStop != nil {
				kv("PreStop", handlerText(lc.PreStop))
			}
		}
		if len(s.Resources.Requests) > 0 {
			kv("Requests", resourceText(s.Resources.Requests))
		}
		if len(s.Resources.Limits) > 0 {
			kv("Limits", resourceText(s.Resources.Limits))
		}
		if cpus := exclusive[s.Name]; cpus != "" {
			kv("Exclusive CPUs", cpus)
		}
		// What the runtime holds, when it is not yet what was allocated
		// (an in-place resize under way or refused).
		if r := cs.Resources; r != nil && (resourceText(r.Requests) != resourceText(s.Resources.Requests) || resourceText(r.Limits) != resourceText(s.Resources.Limits)) {
			kv("Running With", "requests "+orNone(resourceText(r.Requests))+"; limits "+orNone(resourceText(r.Limits)))
		}
		for _, rp := range s.ResizePolicy {
			if rp.RestartPolicy == corev1.RestartContainer {
				kv("Resize Restarts For", string(rp.ResourceName))
			}
		}
		for _, e := range s.Env {
			v := e.Value
			if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
				v = "(" + e.ValueFrom.FieldRef.FieldPath + ")"
			}
			kv("Env "+e.Name, v)
		}
		w.Flush()
	}
}

// getEvictions prints the agent's eviction decisions, oldest first.
func (c *client) getEvictions(output string) error {
	var traces []api.EvictionTrace
	if err := c.fetch("/evictions", &traces); err != nil {
		return err
	}
	if output != "" {
		return emit(c.out, output, traces)
	}
	if len(traces) == 0 {
		fmt.Fprintln(c.out, "No evictions.")
		return nil
	}
	tw := tabwriter.NewWriter(c.out, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tAT\tWOKEN BY\tTHRESHOLD\tAVAILABLE\tNEED\tDECIDE\tKILL SENT\tFREED\tVICTIMS")
	for _, t := range traces {
		var victims []string
		for _, v := range t.Victims {
			desc := fmt.Sprintf("%s (%s, prio %d, %s/%s)", v.Pod, v.QoS, v.Priority,
				resource.NewQuantity(v.Usage, resource.BinarySI), resource.NewQuantity(v.Request, resource.BinarySI))
			if v.Error != "" {
				desc += " error: " + v.Error
			}
			victims = append(victims, desc)
		}
		freed := "-"
		if !t.FreedAt.IsZero() {
			freed = t.FreedAt.Sub(t.KillSentAt).Round(time.Millisecond).String()
		}
		woken := t.TriggeredBy
		if woken == "" {
			woken = "poll"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", t.ID, t.ObservedAt.Format("15:04:05.000"), woken, t.Threshold,
			resource.NewQuantity(t.Available, resource.BinarySI), resource.NewQuantity(t.Need, resource.BinarySI),
			t.DecidedAt.Sub(t.WokeAt).Round(time.Microsecond), t.KillSentAt.Sub(t.ObservedAt).Round(time.Microsecond), freed, strings.Join(victims, ", "))
	}
	return tw.Flush()
}

// probeText is kubectl's one-line probe description.
func probeText(p *corev1.Probe) string {
	action := "<unknown>"
	switch {
	case p.Exec != nil:
		action = fmt.Sprintf("exec %v", p.Exec.Command)
	case p.HTTPGet != nil:
		scheme := strings.ToLower(string(p.HTTPGet.Scheme))
		if scheme == "" {
			scheme = "http"
		}
		action = fmt.Sprintf("http-get %s://%s:%s%s", scheme, p.HTTPGet.Host, p.HTTPGet.Port.String(), p.HTTPGet.Path)
	case p.TCPSocket != nil:
		action = fmt.Sprintf("tcp-socket %s:%s", p.TCPSocket.Host, p.TCPSocket.Port.String())
	case p.GRPC != nil:
		service := ""
		if p.GRPC.Service != nil {
			service = *p.GRPC.Service
		}
		action = fmt.Sprintf("grpc <pod>:%d %s", p.GRPC.Port, service)
	}
	return fmt.Sprintf("%s delay=%ds timeout=%ds period=%ds #success=%d #failure=%d",
		action, p.InitialDelaySeconds, p.TimeoutSeconds, p.PeriodSeconds, p.SuccessThreshold, p.FailureThreshold)
}

// reportText is a probe's published result and its last run.
func reportText(r api.ProbeReport) string {
	out := r.Result
	if r.OnHold {
		out += ", on hold until the container restarts"
	}
	if r.Last == nil {
		return out + " (not run yet)"
	}
	out += fmt.Sprintf("; last run %s ago: %s (x%d in a row, %.0fms)", time.Since(r.Last.Time).Round(time.Second), r.Last.Result, r.Consecutive, r.Last.Duration*1000)
	if r.Last.Message != "" && r.Last.Result != "successful" {
		out += ": " + strings.TrimSpace(r.Last.Message)
	}
	if r.Missed > 0 {
		out += fmt.Sprintf("; %d missed periods", r.Missed)
	}
	return out
}

func handlerText(h *corev1.LifecycleHandler) string {
	switch {
	case h.Exec != nil:
		return fmt.Sprintf("exec %v", h.Exec.Command)
	case h.HTTPGet != nil:
		return fmt.Sprintf("http-get %s://%s:%s%s", strings.ToLower(string(h.HTTPGet.Scheme)), h.HTTPGet.Host, h.HTTPGet.Port.String(), h.HTTPGet.Path)
	case h.Sleep != nil:
		return fmt.Sprintf("sleep %ds", h.Sleep.Seconds)
	}
	return "<unknown>"
}

func stateText(s corev1.ContainerState) string {
	switch {
	case s.Running != nil:
		return "Running, started " + s.Running.StartedAt.Format(time.RFC1123Z)
	case s.Waiting != nil:
		if s.Waiting.Message != "" {
			return fmt.Sprintf("Waiting (%s): %s", s.Waiting.Reason, s.Waiting.Message)
		}
		return "Waiting (" + s.Waiting.Reason + ")"
	case s.Terminated != nil:
		t := s.Terminated
		return fmt.Sprintf("Terminated (%s), exit code %d, started %s, finished %s", t.Reason, t.ExitCode,
			t.StartedAt.Format(time.RFC1123Z), t.FinishedAt.Format(time.RFC1123Z))
	}
	return "<none>"
}

func resourceText(l corev1.ResourceList) string {
	var parts []string
	for name, q := range l {
		parts = append(parts, fmt.Sprintf("%s=%s", name, q.String()))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

func mapText(m map[string]string) string {
	if len(m) == 0 {
		return "<none>"
	}
	var parts []string
	for k, v := range m {
		parts = append(parts, k+"="+v)
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

func (c *client) describeNode() error {
	var n corev1.Node
	if err := c.fetch("/node", &n); err != nil {
		return err
	}
	w := tabwriter.NewWriter(c.out, 0, 8, 1, ' ', 0)
	kv := func(k, v string) { fmt.Fprintf(w, "%s:\t%s\n", k, v) }
	kv("Name", n.Name)
	kv("Status", nodeReadyWord(&n))
	for _, a := range n.Status.Addresses {
		kv(string(a.Type), a.Address)
	}
	kv("Capacity", resourceText(n.Status.Capacity))
	kv("Allocatable", resourceText(n.Status.Allocatable))
	info := n.Status.NodeInfo
	kv("Kernel", info.KernelVersion)
	kv("OS Image", info.OSImage)
	kv("Container Runtime", info.ContainerRuntimeVersion)
	kv("Agent Version", info.KubeletVersion)
	kv("Cgroups", cgroupsText(&n)+" (kubepods "+orNone(n.Annotations[api.AnnotationCgroupRoot])+")")
	var cpus api.CPUManager
	if c.fetch("/cpus", &cpus) == nil && cpus.Policy != "" {
		kv("CPU Manager", cpuManagerText(cpus))
		for _, a := range cpus.Exclusive {
			kv("Exclusive CPUs", a.CPUs+" (pod "+orNone(a.Pod)+", container "+a.Container+")")
		}
	}
	w.Flush()
	fmt.Fprintln(c.out, "Conditions:")
	tw := tabwriter.NewWriter(c.out, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "  Type\tStatus\tReason\tMessage")
	for _, cond := range n.Status.Conditions {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", cond.Type, cond.Status, cond.Reason, cond.Message)
	}
	return tw.Flush()
}

// cpuManagerText is the policy and, under static, its CPUs:
// "static (reserved 0, shared pool 0, strict)".
func cpuManagerText(m api.CPUManager) string {
	if m.Policy != "static" {
		return m.Policy
	}
	s := fmt.Sprintf("static (reserved %s, shared pool %s", m.Reserved, orNone(m.SharedPool))
	if m.StrictReservation {
		s += ", strict"
	}
	return s + ")"
}

// cgroupsText is the node's cgroup version and driver, "v1/cgroupfs".
func cgroupsText(n *corev1.Node) string {
	return orNone(n.Annotations[api.AnnotationCgroupVersion]) + "/" + orNone(n.Annotations[api.AnnotationCgroupDriver])
}

func typeMeta(kind string) metav1.TypeMeta { return metav1.TypeMeta{Kind: kind, APIVersion: "v1"} }
