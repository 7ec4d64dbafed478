package stats

import (
	"runtime"

	info "github.com/google/cadvisor/info/v1"
	v2 "github.com/google/cadvisor/info/v2"
	"github.com/google/cadvisor/metrics"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/clock"

	"nodeagent/cgroups"
)

// CadvisorMetrics is the collector behind /metrics/cadvisor: cadvisor's
// own Prometheus collector over the node, kubepods, pod and container
// cgroups, labelled as the kubelet labels them (container, pod,
// namespace, image, id, name).
func (p *Provider) CadvisorMetrics() prometheus.Collector {
	return metrics.NewPrometheusCollector(cadvisorInfo{p}, containerLabels, cgroups.CadvisorMetrics, clock.RealClock{}, v2.RequestOptions{})
}

// cadvisorInfo answers cadvisor's collector from one pass over the cgroups.
type cadvisorInfo struct{ p *Provider }

func (c cadvisorInfo) GetRequestedContainersInfo(string, v2.RequestOptions) (map[string]*info.ContainerInfo, error) {
	r, err := c.p.readCgroups()
	if err != nil {
		return nil, err
	}
	out := map[string]*info.ContainerInfo{}
	add := func(cg cgroupReading, labels map[string]string, image string) {
		spec := cg.Spec
		spec.Labels, spec.Image = labels, image
		out[cg.Name] = &info.ContainerInfo{ContainerReference: info.ContainerReference{Name: cg.Name}, Spec: spec,
			Stats: []*info.ContainerStats{cg.Stats}}
	}
	add(r.Node, nil, "")
	if r.Kubepods != nil {
		add(*r.Kubepods, nil, "")
	}
	for _, pr := range r.Pods {
		podLabels := map[string]string{labelPodName: pr.Pod.Name, labelPodNamespace: pr.Pod.Namespace, labelPodUID: string(pr.Pod.UID)}
		add(pr.Cgroup, podLabels, "")
		if pr.Sandbox != nil {
			// The kubelet's name for the sandbox, which carries the pod's network.
			add(*pr.Sandbox, withLabel(podLabels, labelContainerName, sandboxContainerName), "")
		}
		images := map[string]string{}
		for _, cs := range append(pr.Pod.Status.InitContainerStatuses, pr.Pod.Status.ContainerStatuses...) {
			images[cs.Name] = cs.Image
		}
		for name, cg := range pr.Containers {
			add(cg, withLabel(podLabels, labelContainerName, name), images[name])
		}
	}
	return out, nil
}

func (c cadvisorInfo) GetVersionInfo() (*info.VersionInfo, error) {
	return &info.VersionInfo{KernelVersion: c.p.KernelVersion, CadvisorVersion: "raw handler"}, nil
}

func (c cadvisorInfo) GetMachineInfo() (*info.MachineInfo, error) {
	return &info.MachineInfo{NumCores: runtime.NumCPU(), MemoryCapacity: uint64(c.p.MemoryCapacity)}, nil
}

// The runtime's labels the kubelet reads container identity from.
const (
	labelPodName       = "io.kubernetes.pod.name"
	labelPodNamespace  = "io.kubernetes.pod.namespace"
	labelPodUID        = "io.kubernetes.pod.uid"
	labelContainerName = "io.kubernetes.container.name"
)

// sandboxContainerName is the container label of a pod's sandbox.
const sandboxContainerName = "POD"

func withLabel(labels map[string]string, key, value string) map[string]string {
	out := map[string]string{key: value}
	for k, v := range labels {
		out[k] = v
	}
	return out
}

// containerLabels are the kubelet's cadvisor labels: id, name and image,
// and the container, pod and namespace each cgroup belongs to.
func containerLabels(c *info.ContainerInfo) map[string]string {
	set := map[string]string{metrics.LabelID: c.Name, metrics.LabelName: "", metrics.LabelImage: c.Spec.Image,
		"container": c.Spec.Labels[labelContainerName], "pod": c.Spec.Labels[labelPodName], "namespace": c.Spec.Labels[labelPodNamespace]}
	return set
}
