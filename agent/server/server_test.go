package server

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

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
