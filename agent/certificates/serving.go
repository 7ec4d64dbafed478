package certificates

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"net"
	"os"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/certificate"
)

// ServingManager requests and renews the kubelet server's certificate
// (serverTLSBootstrap): signer kubernetes.io/kubelet-serving, for the
// node's name and IPs, asked for as the node once it joined. It is kept
// in certDir as kubelet-server-*.pem.
func ServingManager(certDir, node string, ips []net.IP, client func(context.Context) (kubernetes.Interface, error), renewFailures certificate.Counter) (certificate.Manager, error) {
	if err := os.MkdirAll(certDir, 0o700); err != nil {
		return nil, err
	}
	store, err := certificate.NewFileStore("kubelet-server", certDir, certDir, "", "")
	if err != nil {
		return nil, fmt.Errorf("serving certificate directory %s: %w", certDir, err)
	}
	return certificate.NewManager(&certificate.Config{
		ClientsetFn: func(*tls.Certificate) (kubernetes.Interface, error) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			return client(ctx)
		},
		Template: &x509.CertificateRequest{
			Subject:     pkix.Name{CommonName: "system:node:" + node, Organization: []string{"system:nodes"}},
			DNSNames:    []string{node},
			IPAddresses: ips,
		},
		SignerName:              certificatesv1.KubeletServingSignerName,
		Usages:                  []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth},
		CertificateStore:        store,
		Name:                    "kubelet-server",
		CertificateRenewFailure: renewFailures,
	})
}
