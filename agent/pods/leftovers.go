package pods

import (
	"os"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/types"

	"nodeagent/internal/layout"
	"nodeagent/internal/mounts"
)

// orphanPrefix marks a pod directory set aside for removal.
const orphanPrefix = ".orphan-"

// removeOrphanedPodDirs removes the directories under <root>/pods of pods
// that are neither desired, nor have a worker, nor anything in the
// runtime: what a killed agent left behind (a pod deleted before its
// sandbox ran, a termination cut short). Each is set aside at once; the
// removal (mounts below detached first: a secret's tmpfs, subPath binds)
// runs on a goroutine of the manager's, one at a time, so a large
// emptyDir never holds up the manager's loop. It waits for the sources'
// first update, as collectOrphans does.
func (m *Manager) removeOrphanedPodDirs() {
	if !m.setAsideOrphans() || !m.sweeping.CompareAndSwap(false, true) {
		return
	}
	m.wg.Go(func() {
		defer m.sweeping.Store(false)
		m.sweepOrphans()
	})
}

// setAsideOrphans renames the directories of gone pods out of the way and
// reports whether any set-aside directory waits for removal.
func (m *Manager) setAsideOrphans() bool {
	root := layout.Root(m.opts.RootDir).Pods()
	entries, err := os.ReadDir(root)
	if err != nil {
		if !os.IsNotExist(err) {
			m.log.Warn("list pod directories", "dir", root, "err", err)
		}
		return false
	}
	waiting := false
	for _, e := range entries {
		name := e.Name()
		switch {
		case !e.IsDir():
		case strings.HasPrefix(name, orphanPrefix):
			waiting = true
		case m.setAsideOrphan(root, types.UID(name)):
			m.log.Info("removing the directory of a pod that is gone", "pod_uid", name)
			waiting = true
		}
	}
	return waiting
}

// setAsideOrphan renames a gone pod's directory out of the way, under the
// manager's lock: a worker for that pod (a static pod whose manifest comes
// back) then starts from a new directory, never one being removed.
func (m *Manager) setAsideOrphan(root string, uid types.UID) bool {
	if m.cache.Get(uid) != nil {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.synced || m.pods[uid] != nil || m.workers[uid] != nil {
		return false
	}
	if err := os.Rename(filepath.Join(root, string(uid)), filepath.Join(root, orphanPrefix+string(uid))); err != nil {
		m.log.Warn("set aside orphaned pod directory", "pod_uid", uid, "err", err)
		return false
	}
	if m.userns != nil {
		m.userns.Release(uid) // nothing of the pod runs
	}
	return true
}

// sweepOrphans removes the set-aside directories; one that cannot be
// removed is logged once and tried again at the next housekeeping.
func (m *Manager) sweepOrphans() {
	root := layout.Root(m.opts.RootDir).Pods()
	entries, _ := os.ReadDir(root)
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), orphanPrefix) {
			continue
		}
		dir := filepath.Join(root, e.Name())
		if err := mounts.RemoveAll(dir); err != nil && !m.sweepFailed[dir] {
			if m.sweepFailed == nil {
				m.sweepFailed = map[string]bool{}
			}
			m.sweepFailed[dir] = true
			m.log.Warn("remove orphaned pod directory; will retry", "dir", dir, "err", err)
		}
	}
}
