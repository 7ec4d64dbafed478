package server

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"nodeagent/api"
	"nodeagent/internal/control"
)

// Control is what the control socket may ask of the agent.
type Control interface {
	// DeletePod removes the pod's manifest and stops it, with grace
	// seconds when set, else the pod's own grace period.
	DeletePod(ctx context.Context, namespace, name string, grace *int64) error
	// ApplyManifest validates a manifest and writes it into the static pod
	// directory.
	ApplyManifest(data []byte) (api.ManifestResult, error)
}

// ControlHandler serves the control socket: the operations that act on
// the node, kept off the read-only port and open to root only (the peer's
// uid is checked on every connection; see control.RequireUID).
//
//	GET    /configz                                   the configuration in effect, unredacted
//	GET    /pods                                      the pods, unredacted: what nodectl acts on
//	DELETE /pods/{namespace}/{name}[?gracePeriodSeconds=N]
//	POST   /manifests                                 body: a Pod manifest
func ControlHandler(src ControlSources) http.Handler {
	ctl, isNotFound, maxManifest := src.Control, src.IsNotFound, src.MaxManifest
	mux := http.NewServeMux()
	mux.HandleFunc("GET /configz", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, src.Config()) })
	mux.HandleFunc("GET /pods", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, &corev1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"}, Items: src.Pods()})
	})
	mux.HandleFunc("DELETE /pods/{namespace}/{name}", func(w http.ResponseWriter, r *http.Request) {
		var grace *int64
		if v := r.URL.Query().Get("gracePeriodSeconds"); v != "" {
			g, err := strconv.ParseInt(v, 10, 64)
			if err != nil || g < 0 {
				http.Error(w, fmt.Sprintf("gracePeriodSeconds %q: want an integer >= 0", v), http.StatusBadRequest)
				return
			}
			grace = &g
		}
		if err := ctl.DeletePod(r.Context(), r.PathValue("namespace"), r.PathValue("name"), grace); err != nil {
			code := http.StatusInternalServerError
			switch {
			case isNotFound(err):
				code = http.StatusNotFound
			case src.IsRefused != nil && src.IsRefused(err):
				code = http.StatusConflict
			}
			http.Error(w, err.Error(), code)
			return
		}
		w.Write([]byte("deleted\n"))
	})
	mux.HandleFunc("POST /manifests", func(w http.ResponseWriter, r *http.Request) {
		data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxManifest))
		if err != nil {
			http.Error(w, fmt.Sprintf("manifest: %v (at most %d bytes)", err, maxManifest), http.StatusRequestEntityTooLarge)
			return
		}
		res, err := ctl.ApplyManifest(data)
		if err != nil {
			code := http.StatusInternalServerError
			if src.IsInvalid(err) {
				code = http.StatusBadRequest
			}
			http.Error(w, err.Error(), code)
			return
		}
		writeJSON(w, res)
	})
	return control.RequireUID(src.UID, mux)
}

// ControlSources are what the control socket serves.
type ControlSources struct {
	Control Control
	// Config is /configz in full: what nodectl derives host paths from.
	Config func() any
	// Pods are the pods as the agent runs them: the ones nodectl resolves
	// the pod and container it acts on against.
	Pods func() []corev1.Pod
	// IsNotFound, IsInvalid and IsRefused classify errors: 404 (no such
	// pod), 400 (a manifest that does not validate) and 409 (a pod the
	// control socket does not delete: one from the API server); others are
	// 500.
	IsNotFound  func(error) bool
	IsInvalid   func(error) bool
	IsRefused   func(error) bool
	MaxManifest int64
	// UID is the only caller served: the agent's own user (root).
	UID uint32
}
