package server

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"nodeagent/api"
	"nodeagent/internal/control"
)

// The audit found env values on the unauthenticated /pods: a token in an
// env var was anyone's. Values are redacted, names kept; the store's pod
// is not changed.
func TestPodsRedactsSecretsOnTheReadOnlyPort(t *testing.T) {
	pod := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "a", Annotations: map[string]string{
		corev1.LastAppliedConfigAnnotation: `{"spec":{"containers":[{"env":[{"name":"TOKEN","value":"s3cret-applied"}]}]}}`, "kept": "v"}}}
	probe := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{HTTPHeaders: []corev1.HTTPHeader{{Name: "Authorization", Value: "Bearer s3cret-probe"}}}}}
	pod.Spec.Containers = []corev1.Container{{Name: "c", Env: []corev1.EnvVar{{Name: "TOKEN", Value: "s3cret-env"}, {Name: "FROM", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}},
		LivenessProbe: probe, Lifecycle: &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{HTTPGet: &corev1.HTTPGetAction{HTTPHeaders: []corev1.HTTPHeader{{Name: "X-Key", Value: "s3cret-hook"}}}}}}}
	pod.Spec.InitContainers = []corev1.Container{{Name: "i", Env: []corev1.EnvVar{{Name: "PASSWORD", Value: "s3cret-init"}}}}
	pod.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "e", Env: []corev1.EnvVar{{Name: "K", Value: "s3cret-eph"}}}}}
	h := Handler(Sources{Pods: func() []corev1.Pod { return []corev1.Pod{pod} }, Config: func() any { return nil }})
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/pods", nil))
	body := rec.Body.String()
	if strings.Contains(body, "s3cret") {
		t.Errorf("/pods serves a secret:\n%s", body)
	}
	for _, want := range []string{`"TOKEN"`, `"PASSWORD"`, `"Authorization"`, `"(redacted)"`, `"metadata.name"`, `"kept": "v"`, `"kubectl.kubernetes.io/last-applied-configuration": "(redacted)"`} {
		if !strings.Contains(body, want) {
			t.Errorf("/pods lacks %s", want)
		}
	}
	if pod.Spec.Containers[0].Env[0].Value != "s3cret-env" || probe.HTTPGet.HTTPHeaders[0].Value != "Bearer s3cret-probe" || !strings.Contains(pod.Annotations[corev1.LastAppliedConfigAnnotation], "s3cret") {
		t.Error("redaction changed the source's pod")
	}
}

type fakeControl struct {
	deleted []string
	grace   *int64
}

func (f *fakeControl) DeletePod(_ context.Context, ns, name string, grace *int64) error {
	if name == "from-api" {
		return errRefused
	}
	if name == "nosuch" {
		return errNotFound
	}
	f.deleted = append(f.deleted, ns+"/"+name)
	f.grace = grace
	return nil
}

func (f *fakeControl) ApplyManifest(data []byte) (api.ManifestResult, error) {
	if string(data) == "bad" {
		return api.ManifestResult{}, errBad
	}
	return api.ManifestResult{Name: "web", File: "/m/web.yaml", Result: "created"}, nil
}

var errNotFound, errBad, errRefused = errors.New("not found"), errors.New("bad manifest"), errors.New("comes from the API server; use kubectl delete")

// The control socket end to end: served only to the allowed uid, over a
// private socket, with the agent's verbs.
func TestControlSocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run", "nodeagent.sock")
	l, err := control.Listen(path, 4)
	if err != nil {
		t.Fatal(err)
	}
	ctl := &fakeControl{}
	newSrv := func(uid uint32) *http.Server {
		srv := NewServer("", ControlHandler(ControlSources{
			Control: ctl, Config: func() any { return map[string]string{"staticPodPath": "/m"} },
			Pods: func() []corev1.Pod {
				return []corev1.Pod{{ObjectMeta: metav1.ObjectMeta{Name: "web-n"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Env: []corev1.EnvVar{{Name: "K", Value: "v"}}}}}}}
			},
			IsNotFound: func(err error) bool { return errors.Is(err, errNotFound) }, IsInvalid: func(err error) bool { return errors.Is(err, errBad) },
			IsRefused: func(err error) bool { return errors.Is(err, errRefused) }, MaxManifest: 16, UID: uid,
		}))
		srv.ConnContext = control.ConnContext
		return srv
	}
	srv := newSrv(uint32(os.Geteuid()))
	go srv.Serve(l)
	defer srv.Close()
	c := control.Client(path, uint32(os.Geteuid()), 5*time.Second)
	do := func(method, p, body string) (int, string) {
		req, _ := http.NewRequest(method, "http://agent"+p, strings.NewReader(body))
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := do("GET", "/configz", ""); code != 200 || !strings.Contains(body, `"/m"`) {
		t.Errorf("configz: %d %s", code, body)
	}
	if code, body := do("GET", "/pods", ""); code != 200 || !strings.Contains(body, `"web-n"`) || !strings.Contains(body, `"value": "v"`) {
		t.Errorf("pods (root's, unredacted): %d %s", code, body)
	}
	if code, _ := do("DELETE", "/pods/default/web-n", ""); code != 200 || ctl.grace != nil || ctl.deleted[0] != "default/web-n" {
		t.Errorf("delete without grace: %d %+v", code, ctl)
	}
	if code, _ := do("DELETE", "/pods/default/web-n?gracePeriodSeconds=3", ""); code != 200 || ctl.grace == nil || *ctl.grace != 3 {
		t.Errorf("delete with grace: %d %+v", code, ctl)
	}
	if code, _ := do("DELETE", "/pods/default/web-n?gracePeriodSeconds=-1", ""); code != 400 {
		t.Errorf("negative grace: %d", code)
	}
	if code, _ := do("DELETE", "/pods/default/nosuch", ""); code != 404 {
		t.Errorf("missing pod: %d", code)
	}
	if code, body := do("DELETE", "/pods/default/from-api", ""); code != http.StatusConflict || !strings.Contains(body, "kubectl delete") {
		t.Errorf("an API pod: %d %s, want 409 pointing at kubectl delete", code, body)
	}
	if code, body := do("POST", "/manifests", "ok"); code != 200 || !strings.Contains(body, `"/m/web.yaml"`) {
		t.Errorf("apply: %d %s", code, body)
	}
	if code, _ := do("POST", "/manifests", "bad"); code != 400 {
		t.Errorf("bad manifest: %d", code)
	}
	if code, _ := do("POST", "/manifests", strings.Repeat("x", 17)); code != http.StatusRequestEntityTooLarge {
		t.Errorf("manifest over the limit: %d", code)
	}

	// Another uid is refused before any verb runs.
	other := filepath.Join(t.TempDir(), "other.sock")
	l2, _ := control.Listen(other, 4)
	srv2 := newSrv(uint32(os.Geteuid()) + 1)
	go srv2.Serve(l2)
	defer srv2.Close()
	before := len(ctl.deleted)
	req, _ := http.NewRequest("DELETE", "http://agent/pods/default/web-n", nil)
	resp, err := control.Client(other, uint32(os.Geteuid()), 5*time.Second).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || len(ctl.deleted) != before {
		t.Errorf("a caller of another uid: %d, deletes %d -> %d", resp.StatusCode, before, len(ctl.deleted))
	}
}
