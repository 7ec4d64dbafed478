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
// a subPath is; the Host binds subPaths. An image volume is the runtime's
// to mount, read-only, its subPath resolved inside the image.
func (b *Builder) mounts(plan *Plan, c *corev1.Container, env func(string) (string, bool)) ([]*runtimeapi.Mount, error) {
	pod := plan.Pod
	var out []*runtimeapi.Mount
	for i, vm := range c.VolumeMounts {
		sub := vm.SubPath
		if vm.SubPathExpr != "" {
			sub = expand.Vars(vm.SubPathExpr, env)
			if err := manifest.CheckSubPath(sub); err != nil {
				return nil, fmt.Errorf("volumeMounts[%d].subPathExpr %q expands to %q, which %w", i, vm.SubPathExpr, sub, err)
			}
		}
		if isImageVolume(pod, vm.Name) {
			img := plan.ImageVolumes[vm.Name]
			if img == nil {
				return nil, fmt.Errorf("volume %s: the image volume's image is not pulled", vm.Name)
			}
			out = append(out, &runtimeapi.Mount{ContainerPath: vm.MountPath, Image: img, ImageSubPath: sub, Readonly: true,
				Propagation: propagation(vm.MountPropagation)})
			continue
		}
		host, readOnly, err := b.host.Volume(pod, vm.Name)
		if err != nil {
			return nil, fmt.Errorf("volume %s: %w", vm.Name, err)
		}
		readOnly = readOnly || vm.ReadOnly
		if sub != "" {
			target, err := b.host.SubPath(pod, vm.Name, c.Name, i, host, sub)
			if err != nil {
				return nil, fmt.Errorf("volume %s: %w", vm.Name, err)
			}
			host = target
		}
		rro, err := recursiveReadOnly(vm, b.opts.RecursiveReadOnlyMounts)
		if err != nil {
			return nil, err
		}
		out = append(out, &runtimeapi.Mount{ContainerPath: vm.MountPath, HostPath: host, Readonly: readOnly,
			RecursiveReadOnly: rro, Propagation: propagation(vm.MountPropagation)})
	}
	return out, nil
}

func isImageVolume(pod *corev1.Pod, name string) bool {
	for i := range pod.Spec.Volumes {
		if v := &pod.Spec.Volumes[i]; v.Name == name {
			return v.Image != nil
		}
	}
	return false
}

// VolumeMountStatuses are a container's mounts as its status reports
// them, as the kubelet's: a read-only mount says whether it is
// recursively so (rro: the runtime can), a writable one says nothing of it.
func VolumeMountStatuses(c *corev1.Container, rro bool) []corev1.VolumeMountStatus {
	var out []corev1.VolumeMountStatus
	for _, vm := range c.VolumeMounts {
		st := corev1.VolumeMountStatus{Name: vm.Name, MountPath: vm.MountPath, ReadOnly: vm.ReadOnly}
		if vm.ReadOnly {
			mode := corev1.RecursiveReadOnlyDisabled
			if on, err := recursiveReadOnly(vm, rro); err == nil && on {
				mode = corev1.RecursiveReadOnlyEnabled
			}
			st.RecursiveReadOnly = &mode
		}
		out = append(out, st)
	}
	return out
}

// propagation is the CRI's for a mount's mountPropagation (None, the
// default, is private).
func propagation(p *corev1.MountPropagationMode) runtimeapi.MountPropagation {
	switch {
	case p == nil:
	case *p == corev1.MountPropagationHostToContainer:
		return runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER
	case *p == corev1.MountPropagationBidirectional:
		return runtimeapi.MountPropagation_PROPAGATION_BIDIRECTIONAL
	}
	return runtimeapi.MountPropagation_PROPAGATION_PRIVATE
}

// recursiveReadOnly resolves a mount's recursiveReadOnly as the kubelet
// does: Enabled needs a read-only mount without propagation and a runtime
// that says it can (its status's handler features); IfPossible is
// recursive only there.
func recursiveReadOnly(vm corev1.VolumeMount, supported bool) (bool, error) {
	mode := vm.RecursiveReadOnly
	if mode == nil || *mode == corev1.RecursiveReadOnlyDisabled {
		return false, nil
	}
	if !vm.ReadOnly {
		return false, fmt.Errorf("volume %q requested recursive read-only mode, but it is not read-only", vm.Name)
	}
	if p := vm.MountPropagation; p != nil && *p != corev1.MountPropagationNone {
		return false, fmt.Errorf("volume %q requested recursive read-only mode, but it is not compatible with propagation %q", vm.Name, *p)
	}
	switch *mode {
	case corev1.RecursiveReadOnlyIfPossible:
		return supported, nil
	case corev1.RecursiveReadOnlyEnabled:
		if !supported {
			return false, fmt.Errorf("volume %q requested recursive read-only mode, but it is not supported by the runtime", vm.Name)
		}
		return true, nil
	}
	return false, fmt.Errorf("unknown recursive read-only mode %q", *mode)
}
