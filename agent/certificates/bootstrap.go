// Package certificates keeps the node's certificates: TLS bootstrap of the
// client certificate (bootstrap-kubeconfig, rotation) and the kubelet
// server's serving certificate (serverTLSBootstrap).
package certificates

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/transport"
	"k8s.io/client-go/util/certificate"
)

// ClientSigner is the signer of kubelet client certificates.
const ClientSigner = certificatesv1.KubeAPIServerClientKubeletSignerName

// Bootstrap is TLS bootstrap as a kubeadm worker joins: with only a
// bootstrap kubeconfig (a token allowed to create CSRs), the node asks
// for a client certificate (CN system:node:<node>, O system:nodes), waits
// for it to be approved and signed, keeps it under CertDir and writes
// Kubeconfig pointing at it. With Rotate it asks for the next one at
// 70-90 % of the certificate's life (client-go's certificate manager);
// the API client reloads the file.
type Bootstrap struct {
	Kubeconfig, BootstrapKubeconfig string
	CertDir                         string
	Node                            string
	Rotate                          bool
	// Wait bounds one Ensure's wait for the certificate (default 2 m).
	Wait time.Duration
	Log  *slog.Logger
	// RenewFailures counts failed renewals (nil: not counted).
	RenewFailures certificate.Counter

	mu      sync.Mutex
	manager certificate.Manager
	issued  bool // the first certificate was logged
}

// ReloadPeriod is how often the API client looks for a renewed
// certificate file (client-go's default is 5 minutes, an eternity for a
// short-lived certificate); it closes its connections when it changed.
const ReloadPeriod = 10 * time.Second

// ShortenReload makes client-go's API clients made after it reload their
// certificate files every ReloadPeriod. It sets a package variable of
// client-go: call it before any client exists.
func ShortenReload() { transport.CertCallbackRefreshDuration = ReloadPeriod }

// Ensure returns once Kubeconfig holds a usable client certificate:
// at once when it already does (and rotation, if on, is running); else it
// starts the certificate manager on the bootstrap credentials and waits
// up to Wait for the first certificate. A later call continues the wait.
func (b *Bootstrap) Ensure(ctx context.Context) error {
	m, err := b.start()
	if m == nil || err != nil {
		return err
	}
	wait := b.Wait
	if wait <= 0 {
		wait = 2 * time.Minute
	}
	deadline := time.Now().Add(wait)
	for m.Current() == nil {
		if time.Now().After(deadline) {
			return fmt.Errorf("TLS bootstrap: no client certificate after %s: is the CSR for system:node:%s approved? (kubectl get csr)", wait, b.Node)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.writeKubeconfig(); err != nil {
		return err
	}
	if !b.issued {
		b.issued = true
		var expires time.Time
		if leaf := m.Current().Leaf; leaf != nil {
			expires = leaf.NotAfter
		}
		b.Log.Info("client certificate issued", "expires", expires, "kubeconfig", b.Kubeconfig, "rotate", b.Rotate)
	}
	if !b.Rotate {
		m.Stop()
	}
	return nil
}

// start starts the certificate manager once; nil when the kubeconfig is
// usable as it is and nothing rotates.
func (b *Bootstrap) start() (certificate.Manager, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.manager != nil {
		return b.manager, nil
	}
	if err := validClientConfig(b.Kubeconfig, time.Now()); err == nil && !b.Rotate {
		return nil, nil
	} else if err != nil {
		b.Log.Info("requesting a client certificate (TLS bootstrap)", "bootstrap_kubeconfig", b.BootstrapKubeconfig, "because", err, "cert_dir", b.CertDir)
	}
	m, err := b.newManager()
	if err != nil {
		return nil, err
	}
	b.manager = m
	m.Start()
	return m, nil
}

// Current is the client certificate the manager holds; nil without a
// manager (a kubeconfig used as it is).
func (b *Bootstrap) Current() *tls.Certificate {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.manager == nil {
		return nil
	}
	return b.manager.Current()
}

// Stop ends rotation.
func (b *Bootstrap) Stop() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.manager != nil {
		b.manager.Stop()
	}
}

func (b *Bootstrap) store() (certificate.FileStore, error) {
	if err := os.MkdirAll(b.CertDir, 0o700); err != nil {
		return nil, err
	}
	return certificate.NewFileStore("kubelet-client", b.CertDir, b.CertDir, "", "")
}

func (b *Bootstrap) newManager() (certificate.Manager, error) {
	store, err := b.store()
	if err != nil {
		return nil, fmt.Errorf("TLS bootstrap: certificate directory %s: %w", b.CertDir, err)
	}
	return certificate.NewManager(&certificate.Config{
		ClientsetFn: b.clientset,
		Template: &x509.CertificateRequest{Subject: pkix.Name{
			CommonName: "system:node:" + b.Node, Organization: []string{"system:nodes"},
		}},
		SignerName: ClientSigner,
		// The manager's keys are ECDSA: no key encipherment.
		Usages:                  []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth},
		CertificateStore:        store,
		Name:                    "kubelet-client",
		CertificateRenewFailure: b.RenewFailures,
	})
}

// clientset asks for certificates as the node once it has one (a
// renewal), else with the bootstrap token.
func (b *Bootstrap) clientset(current *tls.Certificate) (kubernetes.Interface, error) {
	cluster, auth, err := b.clusterOf(b.BootstrapKubeconfig)
	if err != nil {
		return nil, err
	}
	cfg := &rest.Config{Host: cluster.Server, TLSClientConfig: rest.TLSClientConfig{CAData: cluster.CertificateAuthorityData, CAFile: cluster.CertificateAuthority, Insecure: cluster.InsecureSkipTLSVerify}}
	if current != nil {
		store, err := b.store()
		if err != nil {
			return nil, err
		}
		cfg.CertFile, cfg.KeyFile = store.CurrentPath(), store.CurrentPath()
	} else {
		cfg.BearerToken, cfg.CertData, cfg.KeyData = auth.Token, auth.ClientCertificateData, auth.ClientKeyData
	}
	cfg.Timeout = 30 * time.Second
	return kubernetes.NewForConfig(cfg)
}

// clusterOf reads a kubeconfig's current cluster and user.
func (b *Bootstrap) clusterOf(file string) (*clientcmdapi.Cluster, *clientcmdapi.AuthInfo, error) {
	raw, err := clientcmd.LoadFromFile(file)
	if err != nil {
		return nil, nil, fmt.Errorf("bootstrap kubeconfig %s: %w", file, err)
	}
	ctx := raw.Contexts[raw.CurrentContext]
	if ctx == nil || raw.Clusters[ctx.Cluster] == nil {
		return nil, nil, fmt.Errorf("bootstrap kubeconfig %s: no current context with a cluster", file)
	}
	auth := raw.AuthInfos[ctx.AuthInfo]
	if auth == nil {
		auth = &clientcmdapi.AuthInfo{}
	}
	if err := clientcmdapi.FlattenConfig(raw); err != nil {
		return nil, nil, fmt.Errorf("bootstrap kubeconfig %s: %w", file, err)
	}
	return raw.Clusters[ctx.Cluster], auth, nil
}

// writeKubeconfig points Kubeconfig at the current certificate, with the
// bootstrap kubeconfig's server and CA.
func (b *Bootstrap) writeKubeconfig() error {
	cluster, _, err := b.clusterOf(b.BootstrapKubeconfig)
	if err != nil {
		return err
	}
	store, err := b.store()
	if err != nil {
		return err
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["default-cluster"] = cluster
	cfg.AuthInfos["default-auth"] = &clientcmdapi.AuthInfo{ClientCertificate: store.CurrentPath(), ClientKey: store.CurrentPath()}
	cfg.Contexts["default-context"] = &clientcmdapi.Context{Cluster: "default-cluster", AuthInfo: "default-auth"}
	cfg.CurrentContext = "default-context"
	if old, err := clientcmd.LoadFromFile(b.Kubeconfig); err == nil && sameConfig(old, cfg) {
		return nil
	}
	return clientcmd.WriteToFile(*cfg, b.Kubeconfig)
}

func sameConfig(a, b *clientcmdapi.Config) bool {
	ca, cb := a.Contexts[a.CurrentContext], b.Contexts[b.CurrentContext]
	if ca == nil || cb == nil || a.Clusters[ca.Cluster] == nil || a.AuthInfos[ca.AuthInfo] == nil {
		return false
	}
	return a.Clusters[ca.Cluster].Server == b.Clusters[cb.Cluster].Server &&
		a.AuthInfos[ca.AuthInfo].ClientCertificate == b.AuthInfos[cb.AuthInfo].ClientCertificate
}

// validClientConfig checks that a kubeconfig loads and that its client
// certificate, if it has one, is valid now (the kubelet's check before it
// bootstraps again).
func validClientConfig(file string, now time.Time) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", file)
	if err != nil {
		return err
	}
	if err := rest.LoadTLSFiles(cfg); err != nil {
		return err
	}
	if len(cfg.CertData) == 0 {
		if cfg.BearerToken == "" && cfg.BearerTokenFile == "" {
			return errors.New("no credentials")
		}
		return nil
	}
	pair, err := tls.X509KeyPair(cfg.CertData, cfg.KeyData)
	if err != nil {
		return err
	}
	if now.After(pair.Leaf.NotAfter) {
		return fmt.Errorf("client certificate expired at %s", pair.Leaf.NotAfter)
	}
	return nil
}
