package pods

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"nodeagent/cri"
	"nodeagent/internal/crilog"
)

// The kubelet's termination message limits.
const (
	maxTerminationMessage = 4096
	fallbackLogLines      = 80
	fallbackLogBytes      = 2048
)

// terminationMessageFile creates the host file the kubelet mounts at a
// container's terminationMessagePath: under the pod's directory, with a
// random name, writable by any user the container runs as.
func (m *Manager) terminationMessageFile(pod *corev1.Pod, c *corev1.Container) (string, error) {
	dir := filepath.Join(m.opts.RootDir, "pods", string(pod.UID), "containers", c.Name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	b := make([]byte, 4)
	rand.Read(b)
	file := filepath.Join(dir, hex.EncodeToString(b))
	f, err := os.Create(file)
	if err != nil {
		return "", err
	}
	f.Close()
	return file, os.Chmod(file, 0o666)
}

// terminationMessage is what an exited container left for its status: the
// first 4096 bytes of its message file; when that is empty, the policy is
// FallbackToLogsOnError and the container failed, the last 80 lines of its
// log, cut to 2048 bytes. Both reads are bounded, whatever the container
// wrote.
func terminationMessage(rec *runtimeapi.ContainerStatus) string {
	msg := readAtMost(rec.Annotations[cri.AnnotationTerminationMessageFile], maxTerminationMessage)
	if msg != "" || rec.ExitCode == 0 || rec.Reason == "ContainerCannotRun" ||
		rec.Annotations[cri.AnnotationTerminationMessagePolicy] != string(corev1.TerminationMessageFallbackToLogsOnError) {
		return msg
	}
	f, err := os.Open(rec.LogPath)
	if err != nil {
		return ""
	}
	defer f.Close()
	// "echo -n DONE; exit 1" leaves "DONE", as with the kubelet: a line
	// never ended gets no newline.
	var b bytes.Buffer
	crilog.ReadTail(f, fallbackLogLines, fallbackLogBytes, &b)
	return b.String()
}

func readAtMost(file string, n int64) string {
	if file == "" {
		return ""
	}
	f, err := os.Open(file)
	if err != nil {
		return ""
	}
	defer f.Close()
	b, _ := io.ReadAll(io.LimitReader(f, n))
	return string(b)
}

// joinMessage appends the container's own message to the runtime's.
func joinMessage(runtimeMsg, own string) string {
	switch {
	case own == "":
		return runtimeMsg
	case runtimeMsg == "":
		return own
	}
	return fmt.Sprintf("%s: %s", runtimeMsg, own)
}
