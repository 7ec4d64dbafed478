package criconfig

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"nodeagent/agent/volumes"
	"nodeagent/internal/expand"
	"nodeagent/manifest"
)

// mounts resolves the container's volume mounts to host paths, which the
// Host makes. A subPathExpr is expanded with the container's environment
// and checked as a subPath is; the Host binds subPaths.
func (b *Builder) mounts(pod *corev1.Pod, c *corev1.Container, env func(string) (string, bool)) ([]*runtimeapi.Mount, error) {
	var out []*runtimeapi.Mount
	for i, vm := range c.VolumeMounts {
		var host string
		readOnly := vm.ReadOnly
		for _, v := range pod.Spec.Volumes {
			if v.Name != vm.Name {
				continue
			}
			var err error
			switch {
			case v.EmptyDir != nil:
				host, err = b.host.EmptyDir(pod, &v)
			case v.HostPath != nil:
				host, err = b.host.HostPath(v.HostPath)
			case volumes.Handles(&v):
				// Read-only whatever the mount says, as the kubelet's
				// plugins for these volumes are.
				readOnly = true
				host, err = b.host.ContentVolume(pod, &v)
			}
			if err != nil {
				return nil, fmt.Errorf("volume %s: %w", v.Name, err)
			}
		}
		if host == "" {
			return nil, fmt.Errorf("volume %s not found", vm.Name)
		}
		sub := vm.SubPath
		if vm.SubPathExpr != "" {
			sub = expand.Vars(vm.SubPathExpr, env)
			if err := manifest.CheckSubPath(sub); err != nil {
				return nil, fmt.Errorf("volumeMounts[%d].subPathExpr %q expands to %q, which %w", i, vm.SubPathExpr, sub, err)
			}
		}
		if sub != "" {
			target, err := b.host.SubPath(pod, vm.Name, c.Name, i, host, sub)
			if err != nil {
				return nil, fmt.Errorf("volume %s: %w", vm.Name, err)
			}
			host = target
		}
		out = append(out, &runtimeapi.Mount{ContainerPath: vm.MountPath, HostPath: host, Readonly: readOnly})
	}
	return out, nil
}
