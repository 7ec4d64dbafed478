package certificates

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// writeKubeconfig writes a kubeconfig whose user is auth.
func writeKubeconfig(t *testing.T, auth *clientcmdapi.AuthInfo) string {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["c"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:1", InsecureSkipTLSVerify: true}
	cfg.AuthInfos["u"] = auth
	cfg.Contexts["x"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	cfg.CurrentContext = "x"
	file := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, file); err != nil {
		t.Fatal(err)
	}
	return file
}

func clientCertPEM(t *testing.T, notAfter time.Time) (certPEM, keyPEM []byte) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "system:node:n"},
		NotBefore: notAfter.Add(-time.Hour), NotAfter: notAfter, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalECPrivateKey(key)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

// Bootstrap runs again only when the kubeconfig is missing, has no
// credentials or an expired certificate, as the kubelet decides.
func TestValidClientConfig(t *testing.T) {
	now := time.Now()
	cert, key := clientCertPEM(t, now.Add(time.Hour))
	if err := validClientConfig(writeKubeconfig(t, &clientcmdapi.AuthInfo{ClientCertificateData: cert, ClientKeyData: key}), now); err != nil {
		t.Errorf("a valid certificate: %v", err)
	}
	if err := validClientConfig(writeKubeconfig(t, &clientcmdapi.AuthInfo{Token: "t"}), now); err != nil {
		t.Errorf("a token: %v", err)
	}
	if err := validClientConfig(writeKubeconfig(t, &clientcmdapi.AuthInfo{ClientCertificateData: cert, ClientKeyData: key}), now.Add(2*time.Hour)); err == nil || !strings.Contains(err.Error(), "expired") {
		t.Errorf("an expired certificate: %v", err)
	}
	if err := validClientConfig(writeKubeconfig(t, &clientcmdapi.AuthInfo{}), now); err == nil {
		t.Error("no credentials: accepted")
	}
	if err := validClientConfig(filepath.Join(t.TempDir(), "missing"), now); err == nil {
		t.Error("a missing kubeconfig: accepted")
	}
	// The certificate as a file the store keeps (cert and key in one).
	pair := filepath.Join(t.TempDir(), "kubelet-client-current.pem")
	os.WriteFile(pair, append(cert, key...), 0o600)
	if err := validClientConfig(writeKubeconfig(t, &clientcmdapi.AuthInfo{ClientCertificate: pair, ClientKey: pair}), now); err != nil {
		t.Errorf("a certificate file: %v", err)
	}
}
