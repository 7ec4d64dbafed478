package volumes

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"nodeagent/internal/layout"
)

// hostPathPlugin mounts a path of the node as it is, after the kubelet's
// check of its type: DirectoryOrCreate and FileOrCreate create what is
// missing (a directory 0755 with its parents, a file 0644 whose parent
// must exist), and every type but "" must then find what it names.
// Nothing is torn down: the path is the node's.
type hostPathPlugin struct{}

func (hostPathPlugin) Name() string                  { return layout.PluginHostPath }
func (hostPathPlugin) Handles(v *corev1.Volume) bool { return v.HostPath != nil }
func (hostPathPlugin) Live() bool                    { return false }
func (hostPathPlugin) TearDown(string) error         { return nil }

func (hostPathPlugin) Check(*corev1.Volume, *field.Path, bool) field.ErrorList { return nil }

func (hostPathPlugin) UsageDir(layout.Root, types.UID, *corev1.Volume) string { return "" }

func (hostPathPlugin) SetUp(_ context.Context, _ *Manager, _ *corev1.Pod, v *corev1.Volume) (Mounted, error) {
	var t corev1.HostPathType
	if v.HostPath.Type != nil {
		t = *v.HostPath.Type
	}
	if err := checkHostPath(v.HostPath.Path, t); err != nil {
		return Mounted{}, err
	}
	return Mounted{Path: v.HostPath.Path}, nil
}

// checkHostPath is the kubelet's type check, creating what the OrCreate
// types create. Symlinks are followed, as the bind mount follows them.
func checkHostPath(path string, t corev1.HostPathType) error {
	switch t {
	case corev1.HostPathUnset:
		return nil
	case corev1.HostPathDirectoryOrCreate:
		if !exists(path) {
			return makeDir(path)
		}
		fallthrough
	case corev1.HostPathDirectory:
		return isType(path, corev1.HostPathDirectory, "directory")
	case corev1.HostPathFileOrCreate:
		if !exists(path) {
			return makeFile(path)
		}
		fallthrough
	case corev1.HostPathFile:
		return isType(path, corev1.HostPathFile, "file")
	case corev1.HostPathSocket:
		return isType(path, corev1.HostPathSocket, "socket file")
	case corev1.HostPathCharDev:
		return isType(path, corev1.HostPathCharDev, "character device")
	case corev1.HostPathBlockDev:
		return isType(path, corev1.HostPathBlockDev, "block device")
	}
	return fmt.Errorf("%s is an invalid volume type", t)
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// isType is the kubelet's message when path is not of type t.
func isType(path string, t corev1.HostPathType, what string) error {
	got, err := fileType(path)
	if err != nil {
		return fmt.Errorf("hostPath type check failed, %s is not a %s, unable to determine its type: %w", path, what, err)
	}
	if got != t {
		return fmt.Errorf("hostPath type check failed: %s is not a %s, it's a %s", path, what, got)
	}
	return nil
}

var errUnknownFileType = errors.New("only recognise file, directory, socket, block device and character device")

// fileType names what is at path in the terms of hostPath's type.
func fileType(path string) (corev1.HostPathType, error) {
	st, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("path %q does not exist", path)
	}
	if err != nil {
		return "", err
	}
	switch mode := st.Mode(); {
	case mode.IsDir():
		return corev1.HostPathDirectory, nil
	case mode.IsRegular():
		return corev1.HostPathFile, nil
	case mode&fs.ModeSocket != 0:
		return corev1.HostPathSocket, nil
	case mode&fs.ModeCharDevice != 0:
		return corev1.HostPathCharDev, nil
	case mode&fs.ModeDevice != 0:
		return corev1.HostPathBlockDev, nil
	}
	return "", errUnknownFileType
}

// makeDir creates path and its missing parents 0755, as the kubelet.
func makeDir(path string) error {
	if err := os.MkdirAll(path, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return nil
}

// makeFile creates an empty file 0644; its parent must exist, as in the
// kubelet (FileOrCreate makes no directories).
func makeFile(path string) error {
	f, err := os.OpenFile(path, os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	return f.Close()
}
