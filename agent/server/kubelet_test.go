package server

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"nodeagent/cri"
)

// fakeReviews answers as an API server would: known tokens, and the
// subresources each user may reach.
type fakeReviews struct {
	mu      sync.Mutex
	tokens  map[string]string          // token → user
	allowed map[string]map[string]bool // user → subresources
	asked   []string                   // "token" or "sar user verb sub"
}

func (f *fakeReviews) TokenReview(_ context.Context, r *authenticationv1.TokenReview) (*authenticationv1.TokenReview, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = append(f.asked, "token")
	if u, ok := f.tokens[r.Spec.Token]; ok {
		r.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{Username: u, Groups: []string{"team"}}}
	}
	return r, nil
}

func (f *fakeReviews) SubjectAccessReview(_ context.Context, r *authorizationv1.SubjectAccessReview) (*authorizationv1.SubjectAccessReview, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	a := r.Spec.ResourceAttributes
	f.asked = append(f.asked, strings.Join([]string{"sar", r.Spec.User, a.Verb, a.Resource, a.Subresource, a.Name}, " "))
	r.Status.Allowed = f.allowed[r.Spec.User][a.Subresource]
	return r, nil
}

func (f *fakeReviews) reset() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	asked := f.asked
	f.asked = nil
	return asked
}

func TestGuard(t *testing.T) {
	reviews := &fakeReviews{
		tokens:  map[string]string{"admin-token": "admin", "viewer-token": "viewer"},
		allowed: map[string]map[string]bool{"admin": {"proxy": true, "stats": true}, "viewer": {"pods": true}},
	}
	clk := clocktesting.NewFakePassiveClock(time.Now())
	authn := &Authenticator{Reviews: reviews, CacheTTL: time.Minute, Clock: clk}
	authz := &WebhookAuthorizer{Reviews: reviews, AllowedTTL: 5 * time.Minute, DeniedTTL: 30 * time.Second, Clock: clk}
	var logs bytes.Buffer
	h := Guard(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "served") }), "node-1", authn, authz,
		slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	do := func(method, path, token string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(method, path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	for _, c := range []struct {
		method, path, token string
		code                int
		body                string
	}{
		{"GET", "/pods", "", 401, "Unauthorized\n"},
		{"GET", "/pods", "stolen-token", 401, "Unauthorized\n"},
		{"GET", "/pods", "admin-token", 200, "served"},              // pods denied, proxy allowed
		{"GET", "/stats/summary", "admin-token", 200, "served"},     // stats
		{"POST", "/exec/default/p/c", "admin-token", 200, "served"}, // proxy, verb create
		{"GET", "/pods", "viewer-token", 200, "served"},             // the fine-grained subresource
		{"GET", "/metrics", "viewer-token", 403, "Forbidden (user=viewer, verb=get, resource=nodes, subresource(s)=[metrics])\n"},
		{"GET", "/configz", "viewer-token", 403, "Forbidden (user=viewer, verb=get, resource=nodes, subresource(s)=[configz proxy])\n"},
		{"GET", "/containerLogs/default/p/c", "viewer-token", 403, "Forbidden (user=viewer, verb=get, resource=nodes, subresource(s)=[proxy])\n"},
	} {
		rec := do(c.method, c.path, c.token)
		if rec.Code != c.code || rec.Body.String() != c.body {
			t.Errorf("%s %s with %q: %d %q, want %d %q", c.method, c.path, c.token, rec.Code, rec.Body, c.code, c.body)
		}
	}
	for _, tok := range []string{"admin-token", "viewer-token", "stolen-token"} {
		if strings.Contains(logs.String(), tok) {
			t.Errorf("credential %s reached the log:\n%s", tok, logs.String())
		}
	}
	if !strings.Contains(logs.String(), "user=viewer") {
		t.Errorf("a refusal is not logged with its user:\n%s", logs.String())
	}
	reviews.reset()
	// Answers are cached: a second request asks nothing; a denial
	// expires after 30 s, a grant after 5 m.
	do("GET", "/metrics", "viewer-token")
	do("GET", "/stats/summary", "admin-token")
	if asked := reviews.reset(); len(asked) != 0 {
		t.Errorf("cached answers were asked again: %v", asked)
	}
	clk.SetTime(clk.Now().Add(31 * time.Second))
	do("GET", "/metrics", "viewer-token")
	do("GET", "/stats/summary", "admin-token")
	if asked := reviews.reset(); len(asked) != 1 || asked[0] != "sar viewer get nodes metrics node-1" {
		t.Errorf("after 31 s: asked %v, want only the denial again", asked)
	}
}

func TestAnonymousAndCertificates(t *testing.T) {
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ca"}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, _ := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, caKey.Public(), caKey)
	ca, _ := x509.ParseCertificate(caDER)
	client := func(signer *ecdsa.PrivateKey, parent *x509.Certificate) *x509.Certificate {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "kube-apiserver-kubelet-client", Organization: []string{"system:masters"}},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
		if parent == nil {
			parent, signer = tmpl, key
		}
		der, _ := x509.CreateCertificate(rand.Reader, tmpl, parent, key.Public(), signer)
		c, _ := x509.ParseCertificate(der)
		return c
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	a := &Authenticator{ClientCAs: func() *x509.CertPool { return pool }, Anonymous: true, Clock: clocktesting.NewFakePassiveClock(time.Now())}
	req := httptest.NewRequest("GET", "/pods", nil)
	if u, err := a.Authenticate(req); err != nil || u.Name != "system:anonymous" || u.Groups[0] != "system:unauthenticated" {
		t.Errorf("anonymous: %+v %v", u, err)
	}
	req.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{client(caKey, ca)}}
	if u, err := a.Authenticate(req); err != nil || u.Name != "kube-apiserver-kubelet-client" || u.Groups[0] != "system:masters" || u.Groups[1] != "system:authenticated" {
		t.Errorf("client certificate: %+v %v", u, err)
	}
	// A certificate the CA did not sign is refused, not taken as anonymous.
	req.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{client(nil, nil)}}
	if _, err := a.Authenticate(req); !errors.Is(err, errBadCredentials) {
		t.Errorf("self-signed client certificate: %v", err)
	}
	// A certificate that fails does not hide a token that works (the API
	// server's union of authenticators).
	a.Reviews = &fakeReviews{tokens: map[string]string{"good": "alice"}}
	req.Header.Set("Authorization", "Bearer good")
	if u, err := a.Authenticate(req); err != nil || u.Name != "alice" {
		t.Errorf("bad certificate with a good token: %+v %v", u, err)
	}
	req.Header.Set("Authorization", "Bearer bad")
	if _, err := a.Authenticate(req); !errors.Is(err, errBadCredentials) {
		t.Errorf("bad certificate and bad token: %v", err)
	}
	// Without a client CA, certificates are not looked at: the request is
	// anonymous (when allowed), as it would be without one.
	noCA := &Authenticator{Anonymous: true, Clock: a.Clock}
	req = httptest.NewRequest("GET", "/pods", nil)
	req.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{client(caKey, ca)}}
	if u, err := noCA.Authenticate(req); err != nil || u.Name != "system:anonymous" {
		t.Errorf("a certificate without a client CA: %+v %v", u, err)
	}
	a.Reviews = nil
	// Without a webhook no authenticator looks at a token: the request is
	// anonymous when that is allowed (the kubelet's chain, as the node
	// suite's kubelet runs), refused otherwise.
	req = httptest.NewRequest("GET", "/pods", nil)
	req.Header.Set("Authorization", "Bearer x")
	if u, err := a.Authenticate(req); err != nil || u.Name != "system:anonymous" {
		t.Errorf("token without webhook, anonymous on: %+v %v", u, err)
	}
	a.Anonymous = false
	if _, err := a.Authenticate(req); !errors.Is(err, errBadCredentials) {
		t.Errorf("token without webhook, anonymous off: %v", err)
	}
}

// fakeStreaming is the runtime side of the kubelet handler.
type fakeStreaming struct {
	logPath string
	exec    []string
	url     string // the streaming server; "" for none
}

func (f *fakeStreaming) Exec(_ context.Context, id string, cmd []string, s cri.Streams) (string, error) {
	f.exec = append([]string{id}, cmd...)
	return "", errors.New("no streaming server here")
}
func (f *fakeStreaming) Attach(context.Context, string, cri.Streams) (string, error) {
	return f.url, nil
}
func (f *fakeStreaming) PortForward(context.Context, string, []int32) (string, error) {
	return "", nil
}
func (f *fakeStreaming) ExecSync(_ context.Context, id string, cmd []string, _ time.Duration) (*runtimeapi.ExecSyncResponse, error) {
	return &runtimeapi.ExecSyncResponse{Stdout: []byte(strings.Join(cmd, ",") + "\n"), Stderr: []byte("err\n")}, nil
}
func (f *fakeStreaming) ContainerStatus(_ context.Context, id string) (*runtimeapi.ContainerStatus, error) {
	return &runtimeapi.ContainerStatus{Id: id, LogPath: f.logPath, State: runtimeapi.ContainerState_CONTAINER_EXITED}, nil
}

func TestKubeletHandler(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "0.log")
	os.WriteFile(logPath, []byte("2026-11-24T10:00:00Z stdout F one\n2026-11-24T10:00:01Z stderr F two\n"), 0o644)
	rt := &fakeStreaming{logPath: logPath}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "u1"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app"}, {Name: "side"}}},
		Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{
			{Name: "app", ContainerID: "containerd://c1", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
				LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ContainerID: "containerd://c0"}}},
			{Name: "side", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff"}}},
		}},
	}
	h := KubeletHandler(KubeletSources{
		Sources: emptySources(),
		Pod: func(ns, name string) (*corev1.Pod, bool) {
			if ns == "default" && name == "web" {
				return pod.DeepCopy(), true
			}
			return nil, false
		},
		Sandbox: func(types.UID) string { return "" },
		Runtime: rt,
		Log:     slog.New(slog.DiscardHandler),
	})
	do := func(method, path string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
		return rec
	}
	for _, c := range []struct {
		method, path string
		code         int
		body         string
	}{
		{"GET", "/containerLogs/default/web/app", 200, "one\ntwo\n"},
		{"GET", "/containerLogs/default/web/app?tailLines=1&timestamps=true", 200, "2026-11-24T10:00:01Z two\n"},
		{"GET", "/containerLogs/default/web/app?limitBytes=2", 200, "on"},
		{"GET", "/containerLogs/default/web/app?previous=true&tailLines=1", 200, "two\n"},
		{"GET", "/containerLogs/default/web/app?tailLines=-1", 400, "tailLines: invalid value \"-1\": must be an integer >= 0\n"},
		{"GET", "/containerLogs/default/web/app?sinceTime=yesterday", 400, "sinceTime: invalid value \"yesterday\""},
		{"GET", "/containerLogs/default/web/app?sinceTime=2026-11-24T10:00:00Z&sinceSeconds=5", 400, "at most one of sinceTime or sinceSeconds"},
		{"GET", "/containerLogs/default/web/app?limitBytes=0", 400, "limitBytes: invalid value \"0\""},
		{"GET", "/containerLogs/default/web/side", 400, "container \"side\" in pod \"web\" is waiting to start: ImagePullBackOff\n"},
		{"GET", "/containerLogs/default/web/side?previous=1", 400, "previous terminated container \"side\" in pod \"web\" not found\n"},
		{"GET", "/containerLogs/default/web/nope", 404, "container \"nope\" not found in pod \"web\"\n"},
		{"GET", "/containerLogs/default/gone/app", 404, "pod \"gone\" does not exist\n"},
		{"POST", "/exec/default/web/app?command=ls&output=1", 500, "no streaming server here\n"},
		{"POST", "/exec/default/web/app?command=ls", 400, "you must specify at least 1 of stdin, stdout, stderr\n"},
		{"POST", "/exec/default/web/side?command=ls&output=1", 400, "container \"side\" in pod \"web\" is not running\n"},
		{"POST", "/exec/default/web/u2/app?command=ls&output=1", 404, "pod \"web\" with UID \"u2\" does not exist"},
		{"POST", "/portForward/default/web?port=99999", 400, "port \"99999\": want a port number from 1 to 65535\n"},
		{"POST", "/portForward/default/web", 400, "pod \"web\" has no running sandbox\n"},
		{"POST", "/run/default/web/app?cmd=echo+hi", 200, "echo,hi\nerr\n"},
	} {
		rec := do(c.method, c.path)
		if rec.Code != c.code || !strings.HasPrefix(rec.Body.String(), c.body) {
			t.Errorf("%s %s: %d %q, want %d %q", c.method, c.path, rec.Code, rec.Body, c.code, c.body)
		}
	}
	if strings.Join(rt.exec, " ") != "c1 ls" {
		t.Errorf("exec ran %v, want c1 ls", rt.exec)
	}
}

// An upgrade reaches the runtime as it came: no body added (a chunked
// empty one would put its terminator at the head of the stream), and the
// bytes after the switch flow both ways.
func TestStreamProxy(t *testing.T) {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(r.TransferEncoding) > 0 || r.ContentLength > 0 {
			http.Error(w, fmt.Sprintf("an upgrade with a body: %v %d", r.TransferEncoding, r.ContentLength), 400)
			return
		}
		conn, rw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		rw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: test/1\r\n\r\n")
		rw.Flush()
		line, _ := rw.ReadString('\n')
		rw.WriteString("echo " + line)
		rw.Flush()
	}))
	defer backend.Close()
	rt := &fakeStreaming{url: backend.URL + "/attach/token"}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "u1"},
		Spec:   corev1.PodSpec{Containers: []corev1.Container{{Name: "app"}}},
		Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: "app", ContainerID: "containerd://c1", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}}}
	srv := httptest.NewServer(KubeletHandler(KubeletSources{
		Sources: emptySources(),
		Pod:     func(ns, name string) (*corev1.Pod, bool) { return pod, name == "web" },
		Sandbox: func(types.UID) string { return "" }, Runtime: rt, Log: slog.New(slog.DiscardHandler),
	}))
	defer srv.Close()
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(conn, "POST /attach/default/web/app?output=1 HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: test/1\r\n\r\n")
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		body := ""
		if resp != nil {
			b, _ := io.ReadAll(resp.Body)
			body = string(b)
		}
		t.Fatalf("upgrade: %v %v %s", err, resp, body)
	}
	fmt.Fprintf(conn, "ping\n")
	if line, err := br.ReadString('\n'); err != nil || line != "echo ping\n" {
		t.Errorf("after the switch: %q %v", line, err)
	}
}

// The client CA file is read again when it changes; a broken rewrite
// keeps the last good bundle.
func TestClientCAsReload(t *testing.T) {
	mk := func(cn string) []byte {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn}, NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
		der, _ := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
		return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	}
	file := filepath.Join(t.TempDir(), "ca.crt")
	os.WriteFile(file, mk("first"), 0o644)
	get, err := ClientCAs(file)
	if err != nil {
		t.Fatal(err)
	}
	first := get()
	os.WriteFile(file, append(mk("first"), mk("second")...), 0o644)
	os.Chtimes(file, time.Now().Add(time.Minute), time.Now().Add(time.Minute))
	second := get()
	if second.Equal(first) {
		t.Fatalf("the rewritten bundle was not loaded")
	}
	os.WriteFile(file, []byte("garbage"), 0o644)
	os.Chtimes(file, time.Now().Add(2*time.Minute), time.Now().Add(2*time.Minute))
	if get() != second {
		t.Error("a broken bundle replaced the good one")
	}
	if _, err := ClientCAs(filepath.Join(t.TempDir(), "none")); err == nil {
		t.Error("a missing file was accepted at start")
	}
}

// emptySources are read-only endpoints with nothing to show.
func emptySources() Sources {
	return Sources{Pods: func() []corev1.Pod { return nil }, Events: func() []corev1.Event { return nil },
		Node: func() *corev1.Node { return nil }, Config: func() any { return nil }}
}

// slowReviews answers TokenReviews after release closes, counting them,
// or fails them all when broken.
type slowReviews struct {
	fakeReviews
	release chan struct{}
	broken  bool
	n       int
}

func (s *slowReviews) TokenReview(ctx context.Context, r *authenticationv1.TokenReview) (*authenticationv1.TokenReview, error) {
	<-s.release
	s.mu.Lock()
	s.n++
	broken := s.broken
	s.mu.Unlock()
	if broken {
		return nil, errors.New("rate: Wait(n=1) would exceed context deadline")
	}
	return s.fakeReviews.TokenReview(ctx, r)
}

// A token many requests bring at once costs one TokenReview; a flood of
// refused tokens cannot push a working token out of the cache; review
// errors (a flood meeting the rate limit) are logged sparsely.
func TestTokenFloodAsksOnceAndKeepsWorkingTokens(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reviews := &slowReviews{fakeReviews: fakeReviews{tokens: map[string]string{"good": "admin"}}, release: make(chan struct{})}
		clk := clocktesting.NewFakePassiveClock(time.Now())
		authn := &Authenticator{Reviews: reviews, CacheTTL: time.Minute, Clock: clk}
		req := func(token string) *http.Request {
			r := httptest.NewRequest("GET", "/pods", nil)
			r.Header.Set("Authorization", "Bearer "+token)
			return r
		}
		var wg sync.WaitGroup
		for range 50 {
			wg.Go(func() {
				if u, err := authn.Authenticate(req("good")); err != nil || u.Name != "admin" {
					t.Errorf("good token: %v %v", u, err)
				}
			})
		}
		synctest.Wait() // all 50 wait on the one review
		close(reviews.release)
		wg.Wait()
		if reviews.n != 1 {
			t.Errorf("%d TokenReviews for one token brought by 50 requests at once, want 1", reviews.n)
		}
		for i := range 2 * maxCached {
			if _, err := authn.Authenticate(req(fmt.Sprintf("random-%d", i))); !errors.Is(err, errBadCredentials) {
				t.Fatalf("random token: %v", err)
			}
		}
		before := reviews.n
		if u, err := authn.Authenticate(req("good")); err != nil || u.Name != "admin" || reviews.n != before {
			t.Errorf("after the flood, the good token: %v %v, %d more reviews (want 0: still cached)", u, err, reviews.n-before)
		}
		if _, err := authn.Authenticate(req(fmt.Sprintf("random-%d", 2*maxCached-1))); !errors.Is(err, errBadCredentials) || reviews.n != before {
			t.Errorf("a refused token asked again at once: %v, %d more reviews", err, reviews.n-before)
		}

		reviews.mu.Lock()
		reviews.broken = true
		reviews.mu.Unlock()
		var logs bytes.Buffer
		h := Guard(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}), "n", authn, AlwaysAllow{}, slog.New(slog.NewTextHandler(&logs, nil)))
		for i := range 100 {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req(fmt.Sprintf("other-%d", i)))
			if rec.Code != http.StatusUnauthorized {
				t.Fatalf("a failed review: %d", rec.Code)
			}
		}
		clk.SetTime(clk.Now().Add(11 * time.Second))
		h.ServeHTTP(httptest.NewRecorder(), req("late"))
		if n := strings.Count(logs.String(), "unable to authenticate"); n != 2 || !strings.Contains(logs.String(), "similar_errors_not_logged=99") {
			t.Errorf("%d error lines for 101 failed reviews over 11 s, want 2, the second counting 99:\n%s", n, logs.String())
		}
	})
}
