package criconfig

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"nodeagent/internal/expand"
	"nodeagent/manifest"
)

// mounts looks up where the container's volumes were set up. A
// subPathExpr is expanded with the container's environment and checked as
// a subPath is; the Host binds subPaths.
func (b *Builder) mounts(pod *corev1.Pod, c *corev1.Container, env func(string) (string, bool)) ([]*runtimeapi.Mount, error) {
	var out []*runtimeapi.Mount
	for i, vm := range c.VolumeMounts {
		host, readOnly, err := b.host.Volume(pod, vm.Name)
		if err != nil {
			return nil, fmt.Errorf("volume %s: %w", vm.Name, err)
		}
		readOnly = readOnly || vm.ReadOnly
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
