package main

import (
	"context"
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// bootstrapBindings let bootstrap tokens ask for node client certificates
// and have them approved, and nodes renew their own: kubeadm's bindings.
var bootstrapBindings = []struct{ name, role, group string }{
	{"kubeadm:kubelet-bootstrap", "system:node-bootstrapper", "system:bootstrappers"},
	{"kubeadm:node-autoapprove-bootstrap", "system:certificates.k8s.io:certificatesigningrequests:nodeclient", "system:bootstrappers"},
	{"kubeadm:node-autoapprove-certificate-rotation", "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient", "system:nodes"},
}

// ensureBootstrapRBAC creates the bindings that are missing.
func ensureBootstrapRBAC(ctx context.Context, client kubernetes.Interface) error {
	for _, b := range bootstrapBindings {
		crb := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: b.name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: b.role},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "Group", Name: b.group}},
		}
		if _, err := client.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("cluster role binding %s: %w", b.name, err)
		}
	}
	return nil
}

// bootstrapKubeconfigCommand makes a bootstrap token (a kube-system
// secret, as kubeadm token create does) and writes a kubeconfig carrying
// it: what a joining node is given.
func bootstrapKubeconfigCommand(args []string) error {
	fs := flag.NewFlagSet("controlplane bootstrap-kubeconfig", flag.ContinueOnError)
	dir := fs.String("dir", "", "the cluster's state directory")
	out := fs.String("out", "", "kubeconfig file to write")
	ttl := fs.Duration("ttl", 24*time.Hour, "how long the token may be used")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dir == "" || *out == "" {
		return fmt.Errorf("bootstrap-kubeconfig: --dir and --out are required")
	}
	admin, err := clientcmd.BuildConfigFromFlags("", filepath.Join(*dir, "admin.kubeconfig"))
	if err != nil {
		return fmt.Errorf("bootstrap-kubeconfig: %w (run the cluster in %s first)", err, *dir)
	}
	client, err := kubernetes.NewForConfig(admin)
	if err != nil {
		return err
	}
	id, secret := randomToken(3), randomToken(8)
	tok := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "bootstrap-token-" + id, Namespace: metav1.NamespaceSystem},
		Type:       corev1.SecretTypeBootstrapToken,
		StringData: map[string]string{
			"token-id": id, "token-secret": secret,
			"usage-bootstrap-authentication": "true",
			"expiration":                     time.Now().Add(*ttl).UTC().Format(time.RFC3339),
			"description":                    "nodeagent TLS bootstrap",
		},
	}
	ctx := context.Background()
	if _, err := client.CoreV1().Secrets(metav1.NamespaceSystem).Create(ctx, tok, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("bootstrap token: %w", err)
	}
	ca, err := os.ReadFile(filepath.Join(*dir, "pki", "ca.crt"))
	if err != nil {
		return err
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["local"] = &clientcmdapi.Cluster{Server: admin.Host, CertificateAuthorityData: ca}
	cfg.AuthInfos["tls-bootstrap"] = &clientcmdapi.AuthInfo{Token: id + "." + secret}
	cfg.Contexts["local"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: "tls-bootstrap"}
	cfg.CurrentContext = "local"
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		return err
	}
	return writeFile(*out, data, 0o600)
}

// randomToken is n random bytes as lower-case hex ([a-z0-9], as bootstrap
// tokens must be).
func randomToken(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// approveServingCSRs approves kubelet serving certificate requests, as a
// cluster's kubelet-serving approver does (the controller manager leaves
// them alone): a node may have a serving certificate for its own name
// (CN system:node:<node>, O system:nodes, DNS and IP names only, server
// usages), requested as itself.
func approveServingCSRs(ctx context.Context, client kubernetes.Interface) {
	for ctx.Err() == nil {
		w, err := client.CertificatesV1().CertificateSigningRequests().Watch(ctx, metav1.ListOptions{})
		if err != nil {
			time.Sleep(time.Second)
			continue
		}
		for ev := range w.ResultChan() {
			csr, ok := ev.Object.(*certificatesv1.CertificateSigningRequest)
			if !ok || csr.Spec.SignerName != certificatesv1.KubeletServingSignerName || decided(csr) {
				continue
			}
			approved, why := servingRequestAllowed(csr)
			cond := certificatesv1.CertificateSigningRequestCondition{Type: certificatesv1.CertificateDenied, Status: corev1.ConditionTrue, Reason: "NotAKubeletServingRequest", Message: why}
			if approved {
				cond = certificatesv1.CertificateSigningRequestCondition{Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: "AutoApproved", Message: "kubelet serving certificate of " + csr.Spec.Username}
			}
			csr.Status.Conditions = append(csr.Status.Conditions, cond)
			if _, err := client.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, csr.Name, csr, metav1.UpdateOptions{}); err != nil {
				fmt.Fprintf(os.Stderr, "controlplane: approve %s: %v\n", csr.Name, err)
			}
		}
	}
}

func decided(csr *certificatesv1.CertificateSigningRequest) bool {
	for _, c := range csr.Status.Conditions {
		if c.Type == certificatesv1.CertificateApproved || c.Type == certificatesv1.CertificateDenied {
			return true
		}
	}
	return false
}

func servingRequestAllowed(csr *certificatesv1.CertificateSigningRequest) (bool, string) {
	block, _ := pem.Decode(csr.Spec.Request)
	if block == nil {
		return false, "request is not PEM"
	}
	req, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return false, err.Error()
	}
	node, ok := strings.CutPrefix(req.Subject.CommonName, "system:node:")
	switch {
	case !ok || node == "" || csr.Spec.Username != req.Subject.CommonName:
		return false, "the common name must be system:node:<node> and the requester that node"
	case len(req.Subject.Organization) != 1 || req.Subject.Organization[0] != "system:nodes":
		return false, "the organization must be system:nodes"
	case len(req.EmailAddresses) > 0 || len(req.URIs) > 0:
		return false, "only DNS names and IP addresses"
	}
	for _, u := range csr.Spec.Usages {
		switch u {
		case certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment, certificatesv1.UsageServerAuth:
		default:
			return false, "usage " + string(u) + " is not a serving usage"
		}
	}
	return true, ""
}
