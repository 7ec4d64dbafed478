package pods

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"nodeagent/agent/volumes"
	"nodeagent/internal/layout"
)

// nodeFiles makes what pods' configs point at, under <root>/pods/<uid> in
// the kubelet's layout (criconfig.Host).
type nodeFiles struct{ root layout.Root }

func (f nodeFiles) podDir(uid types.UID) string { return f.root.Pod(uid) }

// podDirMode is the kubelet's for <root>/pods, a pod's directory and its
// volumes directory: secret files below must not be any local user's.
const podDirMode = 0o750

// makePodDirs makes <root>/pods, the pod's directory and its volumes
// directory 0750 (whatever the umask, and also when an older agent made
// them 0755), before anything is written below them.
func (f nodeFiles) makePodDirs(uid types.UID) error {
	if err := os.MkdirAll(string(f.root), podDirMode); err != nil {
		return err
	}
	for _, dir := range []string{f.root.Pods(), f.root.Pod(uid), f.root.Volumes(uid)} {
		if err := os.Mkdir(dir, podDirMode); err != nil && !os.IsExist(err) {
			return err
		}
		st, err := os.Lstat(dir)
		if err != nil {
			return err
		}
		if !st.IsDir() {
			return fmt.Errorf("%s is not a directory", dir)
		}
		if st.Mode().Perm() != podDirMode {
			if err := os.Chmod(dir, podDirMode); err != nil {
				return err
			}
		}
	}
	return nil
}

// EmptyDir creates the volume's directory, a tmpfs for medium Memory.
func (f nodeFiles) EmptyDir(pod *corev1.Pod, v *corev1.Volume) (string, error) {
	dir := f.root.EmptyDir(pod.UID, v.Name)
	// 0777 whatever the umask, as the kubelet: any user the containers
	// run as may write there.
	if err := volumes.MkdirMode(dir, 0o777); err != nil {
		return "", err
	}
	if v.EmptyDir.Medium == corev1.StorageMediumMemory {
		if err := mountTmpfs(dir, v.EmptyDir.SizeLimit); err != nil {
			return "", err
		}
	}
	return dir, nil
}

// HostPath creates a DirectoryOrCreate path.
func (nodeFiles) HostPath(v *corev1.HostPathVolumeSource) (string, error) {
	if v.Type != nil && *v.Type == corev1.HostPathDirectoryOrCreate {
		if err := os.MkdirAll(v.Path, 0o755); err != nil {
			return "", err
		}
	}
	return v.Path, nil
}

// SubPath binds sub at <pod dir>/volume-subpaths/<volume>/<container>/<index>.
func (f nodeFiles) SubPath(pod *corev1.Pod, volume, container string, index int, volumePath, sub string) (string, error) {
	target := f.root.SubPath(pod.UID, volume, container, index)
	return target, bindSubPath(volumePath, sub, target)
}

// ContentVolume is the directory of a configMap, secret, downwardAPI or
// projected volume, once the volume manager has written it.
func (f nodeFiles) ContentVolume(pod *corev1.Pod, v *corev1.Volume) (string, error) {
	dir := volumes.Dir(string(f.root), pod.UID, v)
	if _, err := os.Lstat(filepath.Join(dir, "..data")); err != nil {
		return "", fmt.Errorf("not set up: %w", err)
	}
	return dir, nil
}

// HostsFile writes <pod dir>/etc-hosts.
func (f nodeFiles) HostsFile(pod *corev1.Pod, content []byte) (string, error) {
	if err := f.makePodDirs(pod.UID); err != nil {
		return "", err
	}
	file := f.root.HostsFile(pod.UID)
	return file, os.WriteFile(file, content, 0o644)
}

// TerminationMessageFile creates the host file the kubelet mounts at a
// container's terminationMessagePath: under the pod's directory, with a
// random name, writable by any user the container runs as.
func (f nodeFiles) TerminationMessageFile(pod *corev1.Pod, container string) (string, error) {
	dir := f.root.Container(pod.UID, container)
	if err := os.MkdirAll(dir, podDirMode); err != nil {
		return "", err
	}
	b := make([]byte, 4)
	rand.Read(b)
	file := filepath.Join(dir, hex.EncodeToString(b))
	out, err := os.Create(file)
	if err != nil {
		return "", err
	}
	out.Close()
	return file, os.Chmod(file, 0o666)
}
