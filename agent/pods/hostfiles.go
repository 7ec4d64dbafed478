package pods

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"nodeagent/agent/volumes"
	"nodeagent/internal/layout"
)

// nodeFiles makes what pods' configs point at, under <root>/pods/<uid> in
// the kubelet's layout (criconfig.Host), and looks up where the volume
// manager set their volumes up.
type nodeFiles struct {
	root    layout.Root
	volumes *volumes.Manager
}

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

// Volume is where the pod's volume name was set up by the volume manager.
func (f nodeFiles) Volume(pod *corev1.Pod, name string) (string, bool, error) {
	v, ok := f.volumes.Mount(pod.UID, name)
	if !ok {
		return "", false, errors.New("not set up")
	}
	return v.Path, v.ReadOnly, nil
}

// SubPath binds sub at <pod dir>/volume-subpaths/<volume>/<container>/<index>.
func (f nodeFiles) SubPath(pod *corev1.Pod, volume, container string, index int, volumePath, sub string) (string, error) {
	return f.volumes.SubPath(pod.UID, volume, container, index, volumePath, sub)
}

// VolumeFile reads path beneath the pod's volume.
func (f nodeFiles) VolumeFile(pod *corev1.Pod, volume, path string, limit int64) ([]byte, error) {
	dir, _, err := f.Volume(pod, volume)
	if err != nil {
		return nil, err
	}
	return volumes.ReadBeneath(dir, path, limit)
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
