// Package layout spells, once, where the agent keeps a pod's state on
// disk, in the kubelet's layout, so that the packages that write it (pods,
// volumes), measure it (stats, eviction) and clean it up agree:
//
//	<root>/pods/                                           0750
//	<root>/pods/<uid>/                                     a pod's directory, 0750
//	<root>/pods/<uid>/volumes/<plugin>/<volume>            a volume, by plugin
//	<root>/pods/<uid>/volume-subpaths/<volume>/<container>/<index>
//	<root>/pods/<uid>/containers/<container>/              termination-message files
//	<root>/pods/<uid>/etc-hosts
//	<root>/seccomp/                                        localhost seccomp profiles
//	<root>/device-plugins/                                 device plugins' sockets
//	<logs>/<namespace>_<name>_<uid>/<container>/<restart>.log
//
// It only builds paths; it never touches the disk.
package layout

import (
	"path/filepath"
	"strconv"

	"k8s.io/apimachinery/pkg/types"
)

// The volume plugins' directory names, the kubelet's.
const (
	PluginEmptyDir    = "kubernetes.io~empty-dir"
	PluginHostPath    = "kubernetes.io~host-path" // a name only: a hostPath lives where it is
	PluginConfigMap   = "kubernetes.io~configmap"
	PluginSecret      = "kubernetes.io~secret"
	PluginDownwardAPI = "kubernetes.io~downward-api"
	PluginProjected   = "kubernetes.io~projected"
	PluginImage       = "kubernetes.io~image"
)

// Root is the agent's root directory (--root-dir).
type Root string

// Pods holds every pod's directory.
func (r Root) Pods() string { return filepath.Join(string(r), "pods") }

// Pod is a pod's directory.
func (r Root) Pod(uid types.UID) string { return filepath.Join(r.Pods(), string(uid)) }

// Volumes holds a pod's volumes.
func (r Root) Volumes(uid types.UID) string { return filepath.Join(r.Pod(uid), "volumes") }

// Volume is one volume of a pod, under its plugin's directory.
func (r Root) Volume(uid types.UID, plugin, volume string) string {
	return filepath.Join(r.Volumes(uid), plugin, volume)
}

// EmptyDir is an emptyDir volume of a pod.
func (r Root) EmptyDir(uid types.UID, volume string) string {
	return r.Volume(uid, PluginEmptyDir, volume)
}

// SubPaths holds the bind mounts of a pod's subPaths.
func (r Root) SubPaths(uid types.UID) string { return filepath.Join(r.Pod(uid), "volume-subpaths") }

// SubPath is where the index-th mount of container binds its subPath of
// volume.
func (r Root) SubPath(uid types.UID, volume, container string, index int) string {
	return filepath.Join(r.SubPaths(uid), volume, container, strconv.Itoa(index))
}

// Container holds a container's host files (its termination messages).
func (r Root) Container(uid types.UID, container string) string {
	return filepath.Join(r.Pod(uid), "containers", container)
}

// UserNamespace holds a pod's user namespace range (hostUsers: false),
// the kubelet's "userns" file.
func (r Root) UserNamespace(uid types.UID) string { return filepath.Join(r.Pod(uid), "userns") }

// HostsFile is a pod's /etc/hosts.
func (r Root) HostsFile(uid types.UID) string { return filepath.Join(r.Pod(uid), "etc-hosts") }

// ImagePullIntents holds the pulls under way (the kubelet's
// image_manager/pulling), ImagesPulled the credentials each image was
// pulled with (image_manager/pulled).
func (r Root) ImagePullIntents() string { return filepath.Join(string(r), "image_manager", "pulling") }
func (r Root) ImagesPulled() string     { return filepath.Join(string(r), "image_manager", "pulled") }

// AllocatedPodsState is the checkpoint of what each pod's containers were
// allocated (in-place resize), the kubelet's file name.
func (r Root) AllocatedPodsState() string { return filepath.Join(string(r), "allocated_pods_state") }

// CPUManagerState is the CPU manager's checkpoint of exclusive CPUs.
func (r Root) CPUManagerState() string { return filepath.Join(string(r), "cpu_manager_state") }

// Seccomp holds the localhost seccomp profiles.
func (r Root) Seccomp() string { return filepath.Join(string(r), "seccomp") }

// DevicePlugins holds the device plugins' sockets and the agent's own.
func (r Root) DevicePlugins() string { return filepath.Join(string(r), "device-plugins") }

// PodResources is the pod resources API's socket.
func (r Root) PodResources() string { return filepath.Join(string(r), "pod-resources", "kubelet.sock") }

// Logs is the pods' log directory (podLogsDir).
type Logs string

// Pod is a pod's log directory, as the kubelet names it.
func (l Logs) Pod(namespace, name string, uid types.UID) string {
	return filepath.Join(string(l), namespace+"_"+name+"_"+string(uid))
}

// Container is a container's log directory.
func (l Logs) Container(namespace, name string, uid types.UID, container string) string {
	return filepath.Join(l.Pod(namespace, name, uid), container)
}

// File is the log of a container's restart-th run.
func (l Logs) File(namespace, name string, uid types.UID, container string, restart int) string {
	return filepath.Join(l.Container(namespace, name, uid, container), strconv.Itoa(restart)+".log")
}
