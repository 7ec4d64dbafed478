package server

import (
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
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
	for range 6 {
		flood = append(flood, dial("127.0.0.2"))
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
	dial("127.0.0.3")
	select {
	case c := <-accepted:
		if got := sourceAddress(c.RemoteAddr()); got != "127.0.0.3" {
			t.Errorf("accepted %s, want the other client", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("another client was not accepted while the first held its share")
	}
	held[0].Close()
	dial("127.0.0.2")
	select {
	case <-accepted:
	case <-time.After(5 * time.Second):
		t.Fatal("a closed connection did not give its slot back")
	}
}
