package pods

import (
	"bytes"
	"fmt"
	"io"
	"os"

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
