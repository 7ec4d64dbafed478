package server

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestEndpoints(t *testing.T) {
	healthy := error(nil)
	h := Handler(Sources{
		Pods: func() []corev1.Pod {
			return []corev1.Pod{{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}}
		},
		Node:   func() *corev1.Node { return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}} },
		Events: func() []corev1.Event { return []corev1.Event{{Reason: "Started"}} },
		Config: func() any { return map[string]string{"staticPodPath": "/m"} },
		Checks: []HealthCheck{{Name: "runtime", Check: func() error { return nil }}, {Name: "pleg", Check: func() error { return healthy }}},
	})
	get := func(path string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec
	}
	if rec := get("/healthz"); rec.Code != 200 || rec.Body.String() != "ok" {
		t.Errorf("healthz: %d %q", rec.Code, rec.Body)
	}
	if rec := get("/healthz?verbose"); rec.Code != 200 || rec.Body.String() != "[+]runtime ok\n[+]pleg ok\nhealthz check passed\n" {
		t.Errorf("healthz?verbose: %d %q", rec.Code, rec.Body)
	}
	healthy = errors.New("relist stalled")
	if rec := get("/healthz"); rec.Code != 500 || rec.Body.String() != "[+]runtime ok\n[-]pleg failed: relist stalled\nhealthz check failed\n" {
		t.Errorf("unhealthy: %d %q", rec.Code, rec.Body)
	}
	if rec := get("/healthz/runtime"); rec.Code != 200 || rec.Body.String() != "ok" {
		t.Errorf("healthz/runtime: %d %q", rec.Code, rec.Body)
	}
	if rec := get("/healthz/pleg"); rec.Code != 500 || !strings.Contains(rec.Body.String(), "relist stalled") {
		t.Errorf("healthz/pleg: %d %q", rec.Code, rec.Body)
	}
	if rec := get("/healthz/nope"); rec.Code != 404 {
		t.Errorf("healthz/nope: %d", rec.Code)
	}
	var list corev1.PodList
	rec := get("/pods")
	if err := json.Unmarshal(rec.Body.Bytes(), &list); err != nil || list.Kind != "PodList" || list.APIVersion != "v1" || len(list.Items) != 1 || list.Items[0].Status.Phase != corev1.PodRunning {
		t.Errorf("pods: %v %+v", err, list)
	}
	if rec := get("/configz"); !strings.Contains(rec.Body.String(), `"kubeletconfig"`) || !strings.Contains(rec.Body.String(), `"/m"`) {
		t.Errorf("configz: %s", rec.Body)
	}
	if rec := get("/events"); !strings.Contains(rec.Body.String(), `"kind": "EventList"`) || !strings.Contains(rec.Body.String(), `"Started"`) {
		t.Errorf("events: %s", rec.Body)
	}
	if rec := get("/node"); !strings.Contains(rec.Body.String(), `"name": "n"`) {
		t.Errorf("node: %s", rec.Body)
	}
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/pods", nil))
	if rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST /pods: %d", rec.Code)
	}
}

// One client holding connections cannot take the slots of another: past
// its share its new connections are closed at once, while another
// address still gets in; a closed connection gives its slot back.
func TestLimitClientsKeepsRoomForOthers(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := LimitClients(inner, 8, 3)
	defer l.Close()
	accepted := make(chan net.Conn, 16)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	dial := func(from string) net.Conn {
		t.Helper()
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
		c, err := d.Dial("tcp", inner.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	closedByServer := func(c net.Conn) bool {
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		_, err := c.Read(make([]byte, 1))
		return err == io.EOF || errors.Is(err, syscall.ECONNRESET)
	}
	var flood []net.Conn
	for i := range 6 { // one local user dialling from several loopback addresses
		flood = append(flood, dial(fmt.Sprintf("127.0.0.%d", 2+i%3)))
	}
	var held []net.Conn
	for range 3 {
		held = append(held, <-accepted)
	}
	for _, c := range flood[3:] {
		if !closedByServer(c) {
			t.Error("a connection past the client's share was not closed")
		}
	}
	other := nonLoopback(t)
	dial(other)
	select {
	case c := <-accepted:
		if got := sourceAddress(c.RemoteAddr()); got != other {
			t.Errorf("accepted %s, want the other client %s", got, other)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("another client was not accepted while the first held its share")
	}
	held[0].Close()
	dial("127.0.0.4")
	select {
	case <-accepted:
	case <-time.After(5 * time.Second):
		t.Fatal("a closed connection did not give its slot back")
	}
}

// The self-signed serving certificate is the kubelet's kind: a leaf for
// server authentication signed by a CA made for it alone; the CA's key is
// never written, so nothing on disk can sign another certificate. One an
// older agent made as its own CA is made anew.
func TestSelfSignedIsALeafOfAThrowawayCA(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	certFile, keyFile, err := SelfSigned(dir, "node-1", []net.IP{net.ParseIP("10.0.0.5")}, now)
	if err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		t.Errorf("files %v: want the certificate and the leaf's key only", entries)
	}
	data, _ := os.ReadFile(certFile)
	var certs []*x509.Certificate
	for block, rest := pem.Decode(data); block != nil; block, rest = pem.Decode(rest) {
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		certs = append(certs, c)
	}
	if len(certs) != 2 {
		t.Fatalf("%d certificates in %s, want the leaf then the CA", len(certs), certFile)
	}
	leaf, ca := certs[0], certs[1]
	if leaf.IsCA || leaf.KeyUsage&x509.KeyUsageCertSign != 0 || !ca.IsCA {
		t.Errorf("leaf IsCA %v (usage %b), CA IsCA %v", leaf.IsCA, leaf.KeyUsage, ca.IsCA)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: "node-1", KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		t.Errorf("the leaf does not verify as node-1's serving certificate against its CA: %v", err)
	}
	if err := leaf.VerifyHostname("10.0.0.5"); err != nil {
		t.Error(err)
	}
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	if !pair.Leaf.Equal(leaf) {
		t.Error("the key file is not the leaf's key")
	}
	if caKey, ok := ca.PublicKey.(interface{ Equal(crypto.PublicKey) bool }); !ok || caKey.Equal(pair.Leaf.PublicKey) {
		t.Error("the CA and the leaf share a key")
	}
	// Kept while valid; an old self-signed CA certificate is replaced.
	again, _, _ := SelfSigned(dir, "node-1", nil, now)
	if b, _ := os.ReadFile(again); string(b) != string(data) {
		t.Error("a valid certificate was made anew")
	}
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "node-1"}, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(SelfSignedValidity),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature, DNSNames: []string{"node-1"}}
	der, _ := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	keyDER, _ := x509.MarshalECPrivateKey(key)
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600)
	SelfSigned(dir, "node-1", nil, now)
	if pair, err := tls.LoadX509KeyPair(certFile, keyFile); err != nil || pair.Leaf.IsCA {
		t.Errorf("an old CA certificate was kept: %v", err)
	}
}

// An Accept waiting for a slot returns when the listener closes: the
// server's shutdown does not hang on a full listener.
func TestLimitClientsCloseEndsAWaitingAccept(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := LimitClients(inner, 1, 1)
	c, err := net.Dial("tcp", inner.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	held, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	done := make(chan error, 1)
	go func() { _, err := l.Accept(); done <- err }()
	time.Sleep(50 * time.Millisecond)
	l.Close()
	select {
	case err := <-done:
		if !errors.Is(err, net.ErrClosed) {
			t.Errorf("Accept after Close: %v, want net.ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Accept still waits for a slot after Close")
	}
}

// nonLoopback is an IPv4 address of this host other than loopback.
func nonLoopback(t *testing.T) string {
	t.Helper()
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil {
			return n.IP.String()
		}
	}
	t.Fatal("no IPv4 address but loopback on this host: the test needs a second client address")
	return ""
}

func TestSourceAddressGroupsWhatOneHostHolds(t *testing.T) {
	for addr, want := range map[string]string{
		"127.0.0.1:5": "loopback", "127.8.9.10:5": "loopback", "[::1]:5": "loopback",
		"10.0.0.7:5": "10.0.0.7", "[2001:db8:1:2:aaaa::1]:5": "2001:db8:1:2::/64", "[2001:db8:1:2:bbbb::9]:7": "2001:db8:1:2::/64",
	} {
		tcp, err := net.ResolveTCPAddr("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		if got := sourceAddress(tcp); got != want {
			t.Errorf("%s: %q, want %q", addr, got, want)
		}
	}
}
