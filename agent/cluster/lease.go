package cluster

import (
	"context"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-helpers/apimachinery/lease"
)

// runLease keeps the node's lease in kube-node-lease until ctx ends,
// renewed every quarter of its duration as the kubelet's, through the
// heartbeat client no other request shares.
func (c *Cluster) runLease(ctx context.Context) {
	renew := c.opts.LeaseDuration / 4
	leases := lease.NewController(c.opts.Clock, c.heartbeat, c.opts.Connection.Node, int32(c.opts.LeaseDuration/time.Second),
		func() { c.log.Warn("node lease: repeated renewal failures") }, renew,
		c.opts.Connection.Node, corev1.NamespaceNodeLease, c.ownLease)
	leases.Run(ctx)
}

// ownLease makes the Node the lease's owner, so that deleting the Node
// deletes its lease (the kubelet's SetNodeOwnerFunc).
func (c *Cluster) ownLease(l *coordinationv1.Lease) error {
	if len(l.OwnerReferences) > 0 {
		return nil
	}
	node, err := c.heartbeat.CoreV1().Nodes().Get(context.Background(), c.opts.Connection.Node, metav1.GetOptions{ResourceVersion: "0"})
	if err != nil {
		return fmt.Errorf("node lease owner: %w", err)
	}
	l.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}}
	return nil
}
