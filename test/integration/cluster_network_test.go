//go:build integration

package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"nodeagent/network"
)

// A node's pod network in a cluster is its Node's spec.podCIDRs, set after
// registration as the node IPAM controller sets them, and it stays theirs
// across an agent restart (the config's podCIDR does not take it back).
// The agent's CNI directory is its own here, so the runtime's network
// stays the other tests'.
func TestClusterPodNetworkFollowsTheNodesPodCIDRs(t *testing.T) {
	n, cp := clusterNode(t, "")
	conf := t.TempDir()
	n.args = append(n.args, "--cni-conf-dir", conf)
	n.start()
	ctx := context.Background()
	n.eventually("the Node is registered", 30*time.Second, func() error {
		_, err := cp.Client.CoreV1().Nodes().Get(ctx, n.name, metav1.GetOptions{})
		return err
	})
	const cidr = "10.244.213.0/24"
	patch := fmt.Sprintf(`{"spec":{"podCIDR":%q,"podCIDRs":[%q]}}`, cidr, cidr)
	if _, err := cp.Client.CoreV1().Nodes().Patch(ctx, n.name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(conf, network.ConfFile)
	ranges := func() error {
		data, err := os.ReadFile(file)
		if err != nil {
			return err
		}
		if !strings.Contains(string(data), `"subnet": "`+cidr+`"`) || strings.Contains(string(data), network.DefaultPodCIDR) {
			return fmt.Errorf("%s holds:\n%s", file, data)
		}
		return nil
	}
	n.eventually("the pod network is the Node's podCIDR", 30*time.Second, ranges)
	if !strings.Contains(n.logText(), "podCIDRs="+cidr) {
		t.Errorf("the agent did not log the CIDRs it wrote:\n%s", n.logText())
	}

	if err := n.stop(); err != nil {
		t.Fatal(err)
	}
	n.start()
	// The restarted agent finds the file, then takes the Node's CIDRs
	// again: the file is theirs throughout, never the config's.
	n.eventually("the restarted agent follows the Node", 30*time.Second, func() error {
		if !strings.Contains(n.logText(), "pod CIDRs in effect") {
			return fmt.Errorf("not yet")
		}
		return nil
	})
	if err := ranges(); err != nil {
		t.Errorf("after a restart: %v", err)
	}
	if !strings.Contains(n.logText(), "podCIDRs="+cidr) || strings.Contains(n.logText(), "moved to new pod CIDRs") {
		t.Errorf("a restart moved the network:\n%s", n.logText())
	}
}
