//go:build integration

package integration

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// currentClientCert reads the node's current client certificate.
func currentClientCert(certDir string) (*x509.Certificate, error) {
	data, err := os.ReadFile(filepath.Join(certDir, "kubelet-client-current.pem"))
	if err != nil {
		return nil, err
	}
	for {
		var b *pem.Block
		if b, data = pem.Decode(data); b == nil {
			return nil, fmt.Errorf("no certificate in kubelet-client-current.pem")
		}
		if b.Type == "CERTIFICATE" {
			return x509.ParseCertificate(b.Bytes)
		}
	}
}

// A worker joins with only a bootstrap token: it asks for its client
// certificate, the controller manager approves and signs it, the agent
// writes its kubeconfig and registers, and gets its serving certificate
// signed too; before the client certificate (a minute long here)
// expires, the node renews it as itself and keeps its lease.
func TestClusterTLSBootstrap(t *testing.T) {
	cp := cluster(t)
	ctx := context.Background()
	n := newNodeAt(t, nodeAddress, "nodeLeaseDurationSeconds: 8\nnodeStatusUpdateFrequency: 2s\nrotateCertificates: true\nserverTLSBootstrap: true\n")
	boot := filepath.Join(t.TempDir(), "bootstrap.kubeconfig")
	if err := cp.BootstrapKubeconfig(boot); err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(n.dir, "kubelet.kubeconfig") // written by the agent
	n.args = append(n.args, "--kubeconfig", kubeconfig, "--bootstrap-kubeconfig", boot, "--node-ip", nodeAddress)
	t.Cleanup(func() { cp.Client.CoreV1().Nodes().Delete(context.Background(), n.name, metav1.DeleteOptions{}) })
	n.start()
	n.eventually("the node registered and Ready", time.Minute, func() error {
		node, err := cp.Client.CoreV1().Nodes().Get(ctx, n.name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if c := nodeCondition(node, corev1.NodeReady); c == nil || c.Status != corev1.ConditionTrue {
			return fmt.Errorf("Ready %+v", c)
		}
		return nil
	})
	certDir := filepath.Join(n.agent.RootDir, "pki")
	first, err := currentClientCert(certDir)
	if err != nil {
		t.Fatal(err)
	}
	if first.Subject.CommonName != "system:node:"+n.name || len(first.Subject.Organization) != 1 || first.Subject.Organization[0] != "system:nodes" {
		t.Errorf("client certificate subject %v", first.Subject)
	}
	data, err := os.ReadFile(kubeconfig)
	if err != nil || !strings.Contains(string(data), filepath.Join(certDir, "kubelet-client-current.pem")) {
		t.Errorf("kubeconfig %s does not point at the certificate: %v\n%s", kubeconfig, err, data)
	}
	requesters := func() map[string]bool {
		list, err := cp.Client.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		who := map[string]bool{}
		for _, csr := range list.Items {
			approved := false
			for _, c := range csr.Status.Conditions {
				approved = approved || c.Type == certificatesv1.CertificateApproved
			}
			if csr.Spec.SignerName == certificatesv1.KubeAPIServerClientKubeletSignerName && approved && len(csr.Status.Certificate) > 0 {
				who[csr.Spec.Username] = true
			}
		}
		return who
	}
	bootstrapped := false
	for u := range requesters() {
		bootstrapped = bootstrapped || strings.HasPrefix(u, "system:bootstrap:")
	}
	if !bootstrapped {
		t.Errorf("no approved CSR from a bootstrap token: %v", requesters())
	}

	// serverTLSBootstrap: the kubelet server presents a certificate the
	// cluster CA signed for the node's address (approved by the local
	// cluster's serving approver).
	caPEM, err := os.ReadFile(cp.CAFile())
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)
	n.eventually("the kubelet server presents a cluster-signed certificate", time.Minute, func() error {
		conn, err := tls.Dial("tcp", net.JoinHostPort(nodeAddress, strconv.Itoa(n.agent.KubeletPort)), &tls.Config{RootCAs: roots, ServerName: nodeAddress})
		if err != nil {
			return err
		}
		defer conn.Close()
		if cn := conn.ConnectionState().PeerCertificates[0].Subject.CommonName; cn != "system:node:"+n.name {
			return fmt.Errorf("serving certificate CN %q", cn)
		}
		return nil
	})

	// Rotation: a new certificate, asked for by the node itself.
	var rotated time.Time
	n.eventually("the client certificate rotated", 150*time.Second, func() error {
		cur, err := currentClientCert(certDir)
		if err != nil {
			return err
		}
		if cur.SerialNumber.Cmp(first.SerialNumber) == 0 {
			return fmt.Errorf("still the first certificate (expires %s)", first.NotAfter.Format(time.RFC3339))
		}
		rotated = time.Now()
		return nil
	})
	if !requesters()["system:node:"+n.name] {
		t.Errorf("the renewal was not requested by system:node:%s: %v", n.name, requesters())
	}
	// The node goes on with the new certificate: its lease is renewed
	// after the old one expired.
	n.eventually("the lease renewed after the first certificate expired", time.Until(first.NotAfter)+30*time.Second, func() error {
		l, err := cp.Client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, n.name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if l.Spec.RenewTime == nil || !l.Spec.RenewTime.Time.After(first.NotAfter) || !l.Spec.RenewTime.Time.After(rotated) {
			return fmt.Errorf("renewed at %v (first certificate expired %s)", l.Spec.RenewTime, first.NotAfter.Format(time.RFC3339))
		}
		return nil
	})
}
