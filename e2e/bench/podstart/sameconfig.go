package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"

	"nodeagent/agent/pods/criconfig"
	"nodeagent/internal/layout"
	"nodeagent/internal/qos"
	"nodeagent/manifest"
)

// configFloor is the floor with the agent's own sandbox and container
// configs (criconfig, as the agent builds them for the same manifest):
// the same three CRI calls, asking the runtime for exactly what the agent
// asks for. The gap between it and the plain floor is the runtime's work
// for the kubelet's settings (DNS, hosts file, masked paths...); the gap
// between the agent and it is the agent's own.
type configFloor struct {
	*floor
	dir     string
	builder *criconfig.Builder
}

func newConfigFloor(f *floor) *configFloor {
	dir, err := os.MkdirTemp("", "nodeagent-bench-configs-")
	check(err)
	b := criconfig.New(criconfig.Options{
		NodeName: "floor-configs", PodLogsDir: filepath.Join(dir, "logs"), MemoryCapacity: 1 << 40,
		OOMRange: qos.OOMScoreRange{}, EnforceCPULimits: true, CPUPeriod: 100000, ResolvConf: "/etc/resolv.conf",
		SeccompRoot: layout.Root(dir).Seccomp(),
	}, benchHost{dir}, nil)
	return &configFloor{floor: f, dir: dir, builder: b}
}

// start runs the pod the agent would run for write(name), returning its
// container's start time minus t0.
func (f *configFloor) start(ctx context.Context, name string, t0 time.Time) (time.Duration, error) {
	pod, _, err := manifest.ParseManifest([]byte(podManifest(name)), filepath.Join(f.dir, name+".yaml"), "floor-configs")
	if err != nil {
		return 0, err
	}
	plan := criconfig.NewPlan(pod, floorRoot+"/configs/pod"+string(pod.UID))
	sbCfg, err := f.builder.Sandbox(plan, 0)
	if err != nil {
		return 0, err
	}
	check(os.MkdirAll(sbCfg.LogDirectory, 0o755))
	cfg, err := f.builder.Container(ctx, plan, &pod.Spec.Containers[0], env.Image, 0, "")
	if err != nil {
		return 0, err
	}
	return f.run(ctx, sbCfg, cfg, t0)
}

func (f *configFloor) cleanup(ctx context.Context) {
	f.floor.cleanup(ctx)
	os.RemoveAll(f.dir)
}

// benchHost makes the files a bench pod's containers mount.
type benchHost struct{ dir string }

func (h benchHost) podDir(pod *corev1.Pod) (string, error) {
	dir := layout.Root(h.dir).Pod(pod.UID)
	return dir, os.MkdirAll(dir, 0o755)
}

func (h benchHost) HostsFile(pod *corev1.Pod, content []byte) (string, error) {
	if _, err := h.podDir(pod); err != nil {
		return "", err
	}
	file := layout.Root(h.dir).HostsFile(pod.UID)
	return file, os.WriteFile(file, content, 0o644)
}

// VolumeFile: the benchmark's pods read no env files.
func (h benchHost) VolumeFile(*corev1.Pod, string, string, int64) ([]byte, error) {
	return nil, os.ErrNotExist
}

func (h benchHost) TerminationMessageFile(pod *corev1.Pod, container string) (string, error) {
	dir := layout.Root(h.dir).Container(pod.UID, container)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	file := filepath.Join(dir, "termination-log")
	return file, os.WriteFile(file, nil, 0o666)
}

var errNoVolumes = errors.New("the bench pods have no volumes")

func (benchHost) Volume(*corev1.Pod, string) (string, bool, error) { return "", false, errNoVolumes }
func (benchHost) SubPath(*corev1.Pod, string, string, int, string, string) (string, error) {
	return "", errNoVolumes
}
