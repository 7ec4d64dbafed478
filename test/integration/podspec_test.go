//go:build integration

package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

func (n *node) execIn(p *corev1.Pod, container string, cmd ...string) (string, int32) {
	n.t.Helper()
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name == container {
			resp, err := n.cri.ExecSync(context.Background(), strings.TrimPrefix(cs.ContainerID, "containerd://"), cmd, 10*time.Second)
			if err != nil {
				n.t.Fatalf("exec %v: %v", cmd, err)
			}
			return string(resp.Stdout) + string(resp.Stderr), resp.ExitCode
		}
	}
	n.t.Fatalf("no container %s", container)
	return "", 0
}

func TestPodSpecCoverage(t *testing.T) {
	n := newNode(t, "")
	n.writeManifest("spec.yaml", fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: spec
spec:
  terminationGracePeriodSeconds: 2
  hostAliases:
  - ip: 192.0.2.10
    hostnames: [db, db.example]
  volumes:
  - name: cache
    emptyDir: {medium: Memory, sizeLimit: 8Mi}
  - name: data
    emptyDir: {}
  containers:
  - name: main
    image: %s
    command: ["sh", "-c", "mkdir -p /data/sub && echo in-sub > /data/sub/f; exec sleep 3600"]
    volumeMounts:
    - {name: cache, mountPath: /cache}
    - {name: data, mountPath: /data}
  - name: locked
    image: %[1]s
    command: ["sleep", "3600"]
    securityContext:
      runAsUser: 1000
      runAsGroup: 1000
      readOnlyRootFilesystem: true
    volumeMounts:
    - {name: data, mountPath: /ro, readOnly: true}
    - {name: data, mountPath: /sub, subPath: sub}
`, testImage))
	n.writeManifest("secret.yaml", strings.Replace(podManifest("secret", ""), "spec:\n", "spec:\n  volumes: [{name: s, secret: {secretName: creds}}]\n", 1))
	n.writeManifest("nonroot.yaml", strings.Replace(podManifest("nonroot", ""), "    command:", "    securityContext: {runAsNonRoot: true}\n    command:", 1))
	n.writeManifest("envfile.yaml", fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: envfile
spec:
  terminationGracePeriodSeconds: 2
  volumes: [{name: config, emptyDir: {}}]
  initContainers:
  - name: write
    image: %s
    command: ["sh", "-c", "printf \"# made by the init container\\nGREETING='hello from a file'\\n\" > /config/app.env"]
    volumeMounts: [{name: config, mountPath: /config}]
  containers:
  - name: main
    image: %[1]s
    command: ["sleep", "3600"]
    env:
    - name: GREETING
      valueFrom: {fileKeyRef: {volumeName: config, path: app.env, key: GREETING}}
`, testImage))
	n.writeManifest("override.yaml", strings.Replace(podManifest("override", ""), "spec:\n", "spec:\n  hostname: named\n  hostnameOverride: db-0.backend.example\n", 1))
	n.start()
	p := n.waitRunning("spec")

	hosts, _ := n.execIn(p, "main", "cat", "/etc/hosts")
	for _, want := range []string{"# Kubernetes-managed hosts file.", p.Status.PodIP + "\tspec-" + n.name, "# Entries added by HostAliases.\n192.0.2.10\tdb\tdb.example"} {
		if !strings.Contains(hosts, want) {
			t.Errorf("/etc/hosts lacks %q:\n%s", want, hosts)
		}
	}
	if out, _ := n.execIn(p, "main", "sh", "-c", "grep ' /cache ' /proc/mounts"); !strings.Contains(out, "tmpfs") || !strings.Contains(out, "size=8192k") {
		t.Errorf("memory emptyDir: %q", out)
	}
	if out, _ := n.execIn(p, "locked", "id", "-u"); strings.TrimSpace(out) != "1000" {
		t.Errorf("runAsUser: id -u = %q", out)
	}
	if _, code := n.execIn(p, "locked", "touch", "/rootfs-write"); code == 0 {
		t.Error("readOnlyRootFilesystem: writing / succeeded")
	}
	if _, code := n.execIn(p, "locked", "touch", "/ro/x"); code == 0 {
		t.Error("readOnly volume mount: writing succeeded")
	}
	if out, _ := n.execIn(p, "locked", "cat", "/sub/f"); strings.TrimSpace(out) != "in-sub" {
		t.Errorf("subPath: %q", out)
	}

	// fileKeyRef (1.35): the init container's env file, read at the start.
	ef := n.waitRunning("envfile")
	if out, _ := n.execIn(ef, "main", "sh", "-c", "echo \"$GREETING\""); strings.TrimSpace(out) != "hello from a file" {
		t.Errorf("fileKeyRef: GREETING = %q", out)
	}

	// 1.37's hostnameOverride: the pod's hostname, over spec.hostname.
	o := n.waitRunning("override")
	if out, _ := n.execIn(o, "main", "hostname"); strings.TrimSpace(out) != "db-0.backend.example" {
		t.Errorf("hostnameOverride: hostname = %q", out)
	}
	if hosts, _ := n.execIn(o, "main", "cat", "/etc/hosts"); !strings.Contains(hosts, o.Status.PodIP+"\tdb-0.backend.example\n") {
		t.Errorf("hostnameOverride: /etc/hosts lacks the override:\n%s", hosts)
	}

	n.waitPod("nonroot", 30*time.Second, "refused to run as root", func(p *corev1.Pod) error {
		if p == nil || len(p.Status.ContainerStatuses) == 0 {
			return fmt.Errorf("no status")
		}
		w := p.Status.ContainerStatuses[0].State.Waiting
		if w == nil || w.Reason != "CreateContainerConfigError" || !strings.Contains(w.Message, "container has runAsNonRoot and image will run as root") {
			return fmt.Errorf("state %+v", p.Status.ContainerStatuses[0].State)
		}
		return nil
	})

	rejected := n.waitRejected("secret")
	if rejected.Status.Reason != "UnsupportedPodSpec" || !strings.Contains(rejected.Status.Message, "spec.volumes[0].secret: Forbidden: static pods may not reference API objects (secret)") {
		t.Errorf("secret volume: reason %q message %q", rejected.Status.Reason, rejected.Status.Message)
	}
	if sbs, cs := n.runtimeObjects(string(rejected.UID)); len(sbs)+len(cs) > 0 {
		t.Error("a pod with an unsupported spec reached the runtime")
	}

	n.removeManifest("spec.yaml")
	n.waitGone("spec")
}
