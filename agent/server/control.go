package server

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// Control is what the control socket may ask of the agent.
type Control interface {
	DeletePod(namespace, name string, grace int64) error
}

// ControlHandler serves the control socket: the operations that change
// the node, kept off the read-only port and guarded by file permissions.
//
//	DELETE /pods/{namespace}/{name}?gracePeriodSeconds=N
func ControlHandler(ctl Control, isNotFound func(error) bool) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("DELETE /pods/{namespace}/{name}", func(w http.ResponseWriter, r *http.Request) {
		grace, err := strconv.ParseInt(r.URL.Query().Get("gracePeriodSeconds"), 10, 64)
		if err != nil || grace < 0 {
			http.Error(w, fmt.Sprintf("gracePeriodSeconds %q: want an integer >= 0", r.URL.Query().Get("gracePeriodSeconds")), http.StatusBadRequest)
			return
		}
		if err := ctl.DeletePod(r.PathValue("namespace"), r.PathValue("name"), grace); err != nil {
			code := http.StatusInternalServerError
			if isNotFound(err) {
				code = http.StatusNotFound
			}
			http.Error(w, err.Error(), code)
			return
		}
		w.Write([]byte("deleted\n"))
	})
	return mux
}

// ListenControl opens the control socket at path, readable and writable by
// root only. A live socket there means another agent runs: that is an
// error; a stale one is replaced.
func ListenControl(path string) (net.Listener, error) {
	if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
		c.Close()
		return nil, fmt.Errorf("control socket %s is in use: is another nodeagent running?", path)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(path, 0o600); err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}
