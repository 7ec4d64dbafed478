package cluster

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestConnectionCountsEveryRequest(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`)
	}))
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: %q}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`, srv.URL)), 0o600); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var seen []string
	conn := Connection{Kubeconfig: kubeconfig, QPS: 100, Burst: 100, Node: "n", Observe: func(method, host, code string) {
		mu.Lock()
		seen = append(seen, method+" "+host+" "+code)
		mu.Unlock()
	}}
	client, _, err := conn.Client()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	client.CoreV1().Pods("default").Get(ctx, "p", metav1.GetOptions{})
	client.CoreV1().Pods("default").Delete(ctx, "p", metav1.DeleteOptions{})
	srv.Close()
	client.CoreV1().Nodes().Get(ctx, "n", metav1.GetOptions{})

	u, _ := url.Parse(srv.URL)
	host := u.Host
	want := []string{"GET " + host + " 404", "DELETE " + host + " 404", "GET " + host + " <error>"}
	mu.Lock()
	defer mu.Unlock()
	// client-go retries a refused connection; each try is a request.
	got := slices.Compact(slices.Clone(seen))
	if !slices.Equal(got, want) {
		t.Errorf("observed %q, want %q", seen, want)
	}
}

// Events have a client of their own, so a burst of pod starts' events
// cannot hold up the requests a start waits for.
func TestEventsHaveTheirOwnRateLimit(t *testing.T) {
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://192.0.2.1:6443"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		eventQPS  float32
		wantLimit bool
	}{{7, true}, {-1, false}} {
		conn := Connection{Kubeconfig: kubeconfig, QPS: 50, Burst: 100, EventQPS: tc.eventQPS, EventBurst: 20, Node: "n"}
		client, cfg, err := conn.Client()
		if err != nil {
			t.Fatal(err)
		}
		events, err := conn.EventClient(cfg)
		if err != nil {
			t.Fatal(err)
		}
		main, ev := client.CoreV1().RESTClient().GetRateLimiter(), events.CoreV1().RESTClient().GetRateLimiter()
		if main == nil || main.QPS() != 50 {
			t.Errorf("event QPS %v: the main client's limiter %v, want 50 QPS", tc.eventQPS, main)
		}
		switch {
		case tc.wantLimit && (ev == nil || ev.QPS() != tc.eventQPS || ev == main):
			t.Errorf("events' limiter %v, want its own at %v QPS", ev, tc.eventQPS)
		case !tc.wantLimit && ev != nil:
			t.Errorf("events' limiter %v (%v QPS), want none", ev, ev.QPS())
		}
	}
}
