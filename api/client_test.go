package api

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"nodeagent/internal/control"
)

func TestReadOnlyAPI(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/pods":
			json.NewEncoder(w).Encode(corev1.PodList{Items: []corev1.Pod{{ObjectMeta: metav1.ObjectMeta{Name: "web-n1"}}}})
		case "/pods/default/web-n1/probes":
			json.NewEncoder(w).Encode([]ProbeReport{{Container: "main", Type: Readiness, Result: "success"}})
		case "/evictions":
			json.NewEncoder(w).Encode([]EvictionTrace{{ID: 3, Signal: "memory.available"}})
		case "/healthz":
			http.Error(w, "[-]eviction failed: no observation\nmore", http.StatusInternalServerError)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	ctx := context.Background()
	c := NewClient(srv.URL+"/", "")
	pods, err := c.Pods(ctx)
	if err != nil || len(pods) != 1 || pods[0].Name != "web-n1" {
		t.Fatalf("Pods = %v, %v", pods, err)
	}
	probes, err := c.Probes(ctx, "default", "web-n1")
	if err != nil || len(probes) != 1 || probes[0].Type != Readiness {
		t.Fatalf("Probes = %v, %v", probes, err)
	}
	traces, err := c.Evictions(ctx)
	if err != nil || len(traces) != 1 || traces[0].ID != 3 {
		t.Fatalf("Evictions = %v, %v", traces, err)
	}
	// A failing answer names the path, the status and the body's first line.
	err = c.Healthz(ctx)
	if err == nil || !strings.Contains(err.Error(), "/healthz: 500 Internal Server Error: [-]eviction failed: no observation") || strings.Contains(err.Error(), "more") {
		t.Errorf("Healthz = %v", err)
	}
	if _, err := c.Node(ctx); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("Node on a server without /node = %v", err)
	}
}

func TestUnreachableAgent(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	_, err = NewClient("http://"+addr, "").Pods(context.Background())
	if !errors.Is(err, ErrUnreachable) {
		t.Errorf("Pods against a closed port = %v, want ErrUnreachable", err)
	}
}

func TestControlSocket(t *testing.T) {
	dir := t.TempDir()
	os.Chmod(dir, 0o700)
	sock := filepath.Join(dir, "control.sock")
	l, err := control.Listen(sock, 4)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got = append(got, r.Method+" "+r.URL.RequestURI()+" "+string(body))
		if r.Method == http.MethodPost {
			json.NewEncoder(w).Encode(ManifestResult{Name: "web", File: "/m/web.yaml", Result: "created"})
		}
	})}
	go srv.Serve(l)
	defer srv.Close()

	c := NewClient("http://127.0.0.1:1", sock)
	ctx := context.Background()
	grace := int64(0)
	res, applyErr := c.Apply(ctx, []byte("kind: Pod"))
	deleteErr := c.Delete(ctx, "default", "web-n1", &grace)
	if os.Geteuid() != 0 {
		// The client talks only to a server running as root: this one is not.
		if applyErr == nil || !strings.Contains(applyErr.Error(), "refusing the control socket") || deleteErr == nil {
			t.Fatalf("a control socket served by uid %d was used: %v, %v", os.Geteuid(), applyErr, deleteErr)
		}
		return
	}
	if applyErr != nil || res.Result != "created" || deleteErr != nil {
		t.Fatalf("Apply = %+v, %v; Delete = %v", res, applyErr, deleteErr)
	}
	want := []string{"POST /manifests kind: Pod", "DELETE /pods/default/web-n1?gracePeriodSeconds=0 "}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("the server got %q, want %q", got, want)
	}
	if err := NewClient("", filepath.Join(dir, "missing.sock")).Delete(ctx, "default", "x", nil); err == nil || !strings.Contains(err.Error(), "missing.sock") {
		t.Errorf("Delete through a missing socket = %v", err)
	}
}
