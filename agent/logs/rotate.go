// Package logs rotates container logs as the kubelet's container log
// manager does: when a running container's log passes the size limit it is
// renamed to <log>.<timestamp> and the runtime reopens a fresh file; older
// rotated files are gzipped, and only the newest files are kept, current
// included.
package logs

import (
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"nodeagent/internal/loop"
)

// Runtime is what rotation needs from the runtime.
type Runtime interface {
	ReopenContainerLog(ctx context.Context, id string) error
}

// Containers lists the containers the agent knows of.
type Containers interface {
	Containers() []*runtimeapi.ContainerStatus
}

// Rotator keeps every running container's log within MaxSize × MaxFiles.
type Rotator struct {
	rt         Runtime
	containers Containers
	clock      clock.WithTicker
	log        *slog.Logger

	mu       sync.Mutex // limits change on a config reload
	maxSize  int64
	maxFiles int
}

// NewRotator returns a rotator; maxFiles counts the current file too (>= 2).
func NewRotator(rt Runtime, containers Containers, maxSize int64, maxFiles int, clk clock.WithTicker, log *slog.Logger) *Rotator {
	return &Rotator{rt: rt, containers: containers, maxSize: maxSize, maxFiles: maxFiles, clock: clk, log: log}
}

// SetLimits takes new limits (a config reload); the next check uses them.
func (r *Rotator) SetLimits(maxSize int64, maxFiles int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.maxSize, r.maxFiles = maxSize, maxFiles
}

func (r *Rotator) limits() (int64, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.maxSize, r.maxFiles
}

// Run rotates every interval until ctx is done.
func (r *Rotator) Run(ctx context.Context, interval time.Duration) {
	loop.Every(ctx, r.clock, interval, r.RotateOnce)
}

// timestampFormat names rotated files, as the kubelet does.
const timestampFormat = "20060102-150405"

// RotateOnce checks every running container once.
func (r *Rotator) RotateOnce(ctx context.Context) {
	for _, c := range r.containers.Containers() {
		if c.State != runtimeapi.ContainerState_CONTAINER_RUNNING || c.LogPath == "" {
			continue
		}
		if err := r.rotate(ctx, c); err != nil && ctx.Err() == nil {
			r.log.Warn("rotate container log", "container_id", c.Id, "log", c.LogPath, "err", err)
		}
	}
}

func (r *Rotator) rotate(ctx context.Context, c *runtimeapi.ContainerStatus) error {
	st, err := os.Stat(c.LogPath)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return err
	}
	maxSize, maxFiles := r.limits()
	if st.Size() < maxSize {
		return nil
	}
	// Keep room for the file about to be rotated and the new current one.
	if err := r.trim(c.LogPath, maxFiles-2); err != nil {
		return err
	}
	if err := compressAllBut(c.LogPath, 0); err != nil {
		return err
	}
	rotated := c.LogPath + "." + r.clock.Now().Format(timestampFormat)
	if _, err := os.Stat(rotated); err == nil {
		rotated += fmt.Sprintf(".%d", r.clock.Now().Nanosecond())
	}
	if err := os.Rename(c.LogPath, rotated); err != nil {
		return err
	}
	if err := r.rt.ReopenContainerLog(ctx, c.Id); err != nil {
		// Put the log back so the runtime keeps writing where we read.
		if rerr := os.Rename(rotated, c.LogPath); rerr != nil {
			return errors.Join(err, rerr)
		}
		return err
	}
	return nil
}

// rotatedFiles lists <log>.* newest first.
func rotatedFiles(log string) ([]string, error) {
	files, err := filepath.Glob(log + ".*")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, f := range files {
		if !strings.HasSuffix(f, ".tmp") {
			out = append(out, f)
		}
	}
	sort.Sort(sort.Reverse(sort.StringSlice(out)))
	return out, nil
}

// trim keeps the newest keep rotated files.
func (r *Rotator) trim(log string, keep int) error {
	files, err := rotatedFiles(log)
	if err != nil {
		return err
	}
	for i := max(keep, 0); i < len(files); i++ {
		if err := os.Remove(files[i]); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}

// compressAllBut gzips every rotated file except the newest keep ones.
func compressAllBut(log string, keep int) error {
	files, err := rotatedFiles(log)
	if err != nil {
		return err
	}
	for i := keep; i < len(files); i++ {
		if strings.HasSuffix(files[i], ".gz") {
			continue
		}
		if err := gzipFile(files[i]); err != nil {
			return err
		}
	}
	return nil
}

func gzipFile(path string) error {
	in, err := os.Open(path)
	if err != nil {
		return err
	}
	defer in.Close()
	tmp := path + ".gz.tmp"
	out, err := os.Create(tmp)
	if err != nil {
		return err
	}
	zw := gzip.NewWriter(out)
	_, err = io.Copy(zw, in)
	if cerr := zw.Close(); err == nil {
		err = cerr
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path+".gz")
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Remove(path)
}
