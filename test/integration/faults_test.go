//go:build integration

package integration

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"nodeagent/cri"
)

// kill stops the agent the hard way, as a crash would.
func (n *node) kill() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.cmd.Process.Signal(syscall.SIGKILL)
	<-n.done
	n.cmd = nil
}

func TestSIGKILLWhileStartingPodsLeavesNoDuplicates(t *testing.T) {
	n := newNode(t, "")
	n.start()
	const pods = 20
	for i := 0; i < pods; i++ {
		n.writeManifest(fmt.Sprintf("p%02d.yaml", i), podManifest(fmt.Sprintf("p%02d", i), ""))
	}
	// Kill the agent while the batch is in flight.
	n.eventually("some sandboxes started", 30*time.Second, func() error {
		sbs, err := n.cri.ListPodSandbox(context.Background(), &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{cri.LabelManagedBy: n.name}})
		if err != nil || len(sbs) < 3 {
			return fmt.Errorf("%d sandboxes", len(sbs))
		}
		return nil
	})
	n.kill()
	n.start()
	for i := 0; i < pods; i++ {
		n.waitRunning(fmt.Sprintf("p%02d", i))
	}
	sel := map[string]string{cri.LabelManagedBy: n.name}
	sbs, _ := n.cri.ListPodSandbox(context.Background(), &runtimeapi.PodSandboxFilter{LabelSelector: sel})
	cs, _ := n.cri.ListContainers(context.Background(), &runtimeapi.ContainerFilter{LabelSelector: sel})
	perPod := map[string][2]int{}
	for _, sb := range sbs {
		v := perPod[sb.Labels[cri.LabelPodName]]
		v[0]++
		perPod[sb.Labels[cri.LabelPodName]] = v
	}
	for _, c := range cs {
		v := perPod[c.Labels[cri.LabelPodName]]
		v[1]++
		perPod[c.Labels[cri.LabelPodName]] = v
	}
	if len(perPod) != pods {
		t.Errorf("%d pods in the runtime, want %d", len(perPod), pods)
	}
	for pod, v := range perPod {
		if v != [2]int{1, 1} {
			t.Errorf("%s: %d sandboxes and %d containers, want exactly one of each", pod, v[0], v[1])
		}
	}
	for i := 0; i < pods; i++ {
		p, _ := n.pod(fmt.Sprintf("p%02d", i))
		if p.Status.ContainerStatuses[0].RestartCount != 0 {
			t.Errorf("%s restarted %d times", p.Name, p.Status.ContainerStatuses[0].RestartCount)
		}
	}
}
