package main

import (
	"net/http"
	"path/filepath"
	"testing"

	"nodeagent/internal/control"
)

func TestRuntimeEndpointIsTheRunningAgents(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	sock := filepath.Join(dir, "nodeagent.sock")
	ln, err := control.Listen(sock, 4)
	if err != nil {
		t.Fatalf("a control socket (the tests run as root): %v", err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"kubeletconfig": {"containerRuntimeEndpoint": "unix:///run/elsewhere/containerd.sock"}}`))
	}), ConnContext: control.ConnContext}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })

	tr := &tester{server: "http://127.0.0.1:1", controlSocket: sock}
	if got := tr.runtimeEndpoint(); got != "unix:///run/elsewhere/containerd.sock" {
		t.Errorf("with an agent: %q, want the agent's endpoint", got)
	}
	tr.controlSocket = filepath.Join(dir, "absent.sock")
	if got := tr.runtimeEndpoint(); got != defaultRuntimeEndpoint {
		t.Errorf("without an agent: %q, want the default %q", got, defaultRuntimeEndpoint)
	}
}
