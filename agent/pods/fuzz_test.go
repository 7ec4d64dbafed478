package pods

import (
	"context"
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"nodeagent/agent/pods/criconfig"
	"nodeagent/cgroups"
	"nodeagent/internal/qos"
	"nodeagent/manifest"
	"nodeagent/probes"
)

// A manifest, from parse to what the agent would hand the kernel and the
// runtime: any input is refused or turns into values in their ranges.
// Whatever passes validation must never produce a wrapped limit, a share
// count out of range or an OOM score the kernel refuses. The files mounts
// point at are only named (paperHost): making them is nodeFiles' job.
func FuzzManifestToPodConfig(f *testing.F) {
	f.Add([]byte(`apiVersion: v1
kind: Pod
metadata: {name: web, labels: {app: web}}
spec:
  containers:
  - name: main
    image: busybox
    resources: {requests: {cpu: 100m, memory: 64Mi}, limits: {cpu: "1", memory: 128Mi}}
    env: [{name: A, value: b}, {name: M, valueFrom: {resourceFieldRef: {resource: limits.memory, divisor: 1Mi}}}]
`))
	f.Add([]byte(`apiVersion: v1
kind: Pod
metadata: {name: huge}
spec:
  terminationGracePeriodSeconds: 9223372036854775807
  activeDeadlineSeconds: 4294967295
  overhead: {cpu: "9223372036854775", memory: "9223372036854775807"}
  initContainers:
  - {name: side, image: b, restartPolicy: Always, resources: {requests: {memory: "9223372036854775807"}}}
  containers:
  - {name: a, image: b, resources: {limits: {cpu: "9223372036854775807m", memory: "9223372036854775807"}}}
  - {name: c, image: b, resources: {limits: {cpu: "9223372036854775807m", memory: "9223372036854775807"}}}
`))
	f.Add([]byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"j"},"spec":{"hostNetwork":true,"dnsPolicy":"None","dnsConfig":{"nameservers":["1.1.1.1"]},"containers":[{"name":"x","image":"y","volumeMounts":[{"name":"v","mountPath":"/v","subPath":"a/b"}]}],"volumes":[{"name":"v","emptyDir":{"sizeLimit":"1Gi"}}]}}`))
	f.Add([]byte("apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec: {containers: [{name: a, image: b, resources: {limits: {cpu: 1e30}}}]}\n"))
	m := testManager(f, Options{MemoryCapacity: 16 << 30, Allocatable: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("16Gi")}})
	configs := criconfig.New(criconfig.Options{NodeName: "node", MemoryCapacity: m.opts.MemoryCapacity, Allocatable: m.opts.Allocatable, EnforceCPULimits: true, CPUPeriod: 100000}, paperHost{}, nil)
	f.Fuzz(func(t *testing.T, data []byte) {
		pod, _, err := manifest.ParseManifest(data, "/m/x.yaml", "node")
		if err != nil {
			return
		}
		if len(unsupported(pod, true)) > 0 || len(probes.Validate(pod)) > 0 {
			return
		}
		admit(pod, nil, 110, m.opts.Allocatable, nil)
		rc := cgroups.PodConfig(pod, cgroups.PodOptions{EnforceCPULimits: true})
		if s := rc.CPUShares; s != nil && (*s < cgroups.MinShares || *s > cgroups.MaxShares) {
			t.Fatalf("cpu.shares %d", *s)
		}
		if q := rc.CPUQuota; q != nil && *q != -1 && *q != 0 && (*q < cgroups.MinQuotaPeriod || *q > cgroups.MaxQuota) {
			t.Fatalf("cpu quota %d", *q)
		}
		if mem := rc.Memory; mem != nil && *mem < 0 {
			t.Fatalf("memory limit %d", *mem)
		}
		plan := criconfig.NewPlan(pod, "/kubepods/pod"+string(pod.UID))
		if _, err := configs.Sandbox(plan, 0); err != nil && !strings.Contains(err.Error(), "resolv") {
			t.Fatalf("sandbox config of a valid pod: %v", err)
		}
		for i := range pod.Spec.Containers {
			c := &pod.Spec.Containers[i]
			adj := qos.ContainerOOMScoreAdj(pod, c, m.opts.MemoryCapacity, false)
			if adj < -1000 || adj > 1000 {
				t.Fatalf("oom_score_adj %d", adj)
			}
			cfg, err := configs.Container(context.Background(), plan, c, "img", 0, "10.0.0.1")
			if err != nil {
				continue // a downward API reference the agent does not support
			}
			r := cfg.Linux.Resources
			if r.MemoryLimitInBytes < 0 || r.CpuShares < 0 || r.CpuQuota < -1 || r.CpuQuota > cgroups.MaxQuota || r.OomScoreAdj < -1000 || r.OomScoreAdj > 1000 {
				t.Fatalf("container resources %+v", r)
			}
		}
		if g := gracePeriod(pod, nil); g < 2 {
			t.Fatalf("grace %d", g)
		}
	})
}

// paperHost names the files a config points at without making them.
type paperHost struct{}

func (paperHost) Volume(_ *corev1.Pod, name string) (string, bool, error) {
	return "/v/" + name, false, nil
}
func (paperHost) SubPath(_ *corev1.Pod, volume, container string, index int, _, _ string) (string, error) {
	return "/s/" + volume + "/" + container, nil
}
func (paperHost) HostsFile(*corev1.Pod, []byte) (string, error) { return "/hosts", nil }
func (paperHost) VolumeFile(*corev1.Pod, string, string, int64) ([]byte, error) {
	return nil, os.ErrNotExist
}

func (paperHost) TerminationMessageFile(*corev1.Pod, string) (string, error) { return "/msg", nil }
