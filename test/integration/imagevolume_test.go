//go:build integration

package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Image volumes (GA 1.36): the runtime mounts a pulled image read-only,
// a subPath inside it too; a container mounting one whose image cannot be
// pulled waits with the pull's reason while the pod's other containers
// run.
func TestImageVolumes(t *testing.T) {
	n := newNode(t, "")
	n.writeManifest("img.yaml", fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: imgvol
spec:
  terminationGracePeriodSeconds: 2
  volumes:
  - name: tools
    image: {reference: %s, pullPolicy: IfNotPresent}
  - name: missing
    image: {reference: 127.0.0.1:1/nodeagent/missing:1.0, pullPolicy: Always}
  containers:
  - name: main
    image: %[1]s
    command: ["sleep", "3600"]
    volumeMounts:
    - {name: tools, mountPath: /tools}
    - {name: tools, mountPath: /tools-bin, subPath: bin}
  - name: waits
    image: %[1]s
    command: ["sleep", "3600"]
    volumeMounts:
    - {name: missing, mountPath: /missing}
`, testImage))
	n.start()
	p := n.waitPod("imgvol", time.Minute, "main running, waits waiting on its pull", func(p *corev1.Pod) error {
		if p == nil {
			return fmt.Errorf("not listed")
		}
		var main, waits bool
		for _, cs := range p.Status.ContainerStatuses {
			switch {
			case cs.Name == "main" && cs.State.Running != nil:
				main = true
			case cs.Name == "waits" && cs.State.Waiting != nil && (cs.State.Waiting.Reason == "ErrImagePull" || cs.State.Waiting.Reason == "ImagePullBackOff"):
				waits = true
			}
		}
		if !main || !waits {
			return fmt.Errorf("statuses %+v", p.Status.ContainerStatuses)
		}
		return nil
	})
	if out, code := n.execIn(p, "main", "sh", "-c", "test -x /tools/bin/sh && test -x /tools-bin/sh && echo found"); code != 0 || strings.TrimSpace(out) != "found" {
		t.Errorf("the image's files under /tools and /tools-bin: %q (exit %d)", out, code)
	}
	if _, code := n.execIn(p, "main", "touch", "/tools/x"); code == 0 {
		t.Error("an image volume is writable")
	}
	// Image GC counts the volume's image as in use while main mounts it.
	_, containers := n.runtimeObjects(string(p.UID))
	var annotated bool
	for _, c := range containers {
		if c.Metadata.Name == "main" && strings.HasPrefix(c.Annotations["nodeagent.io/image-volumes"], "sha256:") {
			annotated = true
		}
	}
	if !annotated {
		t.Error("main does not name its image volume's image for image GC")
	}
	if strings.Contains(n.logText(), "level=ERROR") {
		t.Errorf("agent logged errors:\n%s", n.logText())
	}
}
