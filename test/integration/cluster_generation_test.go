//go:build integration

package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The status of an API pod, and each condition the node owns, says which
// generation of the spec it was computed from: 1 once it runs, the new
// generation after a spec update (activeDeadlineSeconds, which may be set
// on a running pod), as a 1.35+ kubelet reports them.
func TestClusterPodStatusObservesTheGeneration(t *testing.T) {
	n, cp := clusterNode(t, "")
	n.start()
	ctx := context.Background()
	pod := apiPod("generation-"+randomHex(3), n.name, nil)
	if _, err := cp.Client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	observed := func(gen int64) func(*corev1.Pod) error {
		return func(p *corev1.Pod) error {
			if p.Generation != gen {
				return fmt.Errorf("metadata.generation %d, want %d", p.Generation, gen)
			}
			if p.Status.Phase != corev1.PodRunning || p.Status.ObservedGeneration != gen {
				return fmt.Errorf("phase %s, status.observedGeneration %d", p.Status.Phase, p.Status.ObservedGeneration)
			}
			for _, c := range p.Status.Conditions {
				if c.ObservedGeneration != gen {
					return fmt.Errorf("condition %s observedGeneration %d", c.Type, c.ObservedGeneration)
				}
			}
			return nil
		}
	}
	cp.waitAPIPod(t, "default", pod.Name, time.Minute, "running, generation 1 observed", observed(1))

	patch := []byte(`{"spec":{"activeDeadlineSeconds":3600}}`)
	if _, err := cp.Client.CoreV1().Pods("default").Patch(ctx, pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	cp.waitAPIPod(t, "default", pod.Name, 30*time.Second, "generation 2 observed after the update", observed(2))
}
