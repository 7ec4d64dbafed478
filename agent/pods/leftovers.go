package pods

import (
	"os"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/types"

	"nodeagent/internal/mounts"
)

// orphanPrefix marks a pod directory set aside for removal.
const orphanPrefix = ".orphan-"

// removeOrphanedPodDirs removes the directories under <root>/pods of pods
// that are neither desired, nor have a worker, nor anything in the
// runtime: what a killed agent left behind (a pod deleted before its
// sandbox ran, a termination cut short). Mounts below them (a secret's
// tmpfs, subPath binds) are detached first. It waits for the sources'
// first update, as collectOrphans does.
func (m *Manager) removeOrphanedPodDirs() {
	root := filepath.Join(m.opts.RootDir, "pods")
	entries, err := os.ReadDir(root)
	if err != nil {
		if !os.IsNotExist(err) {
			m.log.Warn("list pod directories", "dir", root, "err", err)
		}
		return
	}
	for _, e := range entries {
		name := e.Name()
		if !e.IsDir() {
			continue
		}
		dir := filepath.Join(root, name)
		if !strings.HasPrefix(name, orphanPrefix) {
			var ok bool
			if dir, ok = m.setAsideOrphan(root, types.UID(name)); !ok {
				continue
			}
			m.log.Info("removing the directory of a pod that is gone", "pod_uid", name)
		}
		if err := mounts.RemoveAll(dir); err != nil {
			m.log.Warn("remove orphaned pod directory", "dir", dir, "err", err)
		}
	}
}

// setAsideOrphan renames a gone pod's directory out of the way, under the
// manager's lock: a worker for that pod (a static pod whose manifest comes
// back) then starts from a new directory, never one being removed.
func (m *Manager) setAsideOrphan(root string, uid types.UID) (string, bool) {
	if m.cache.Get(uid) != nil {
		return "", false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.synced || m.pods[uid] != nil || m.workers[uid] != nil {
		return "", false
	}
	aside := filepath.Join(root, orphanPrefix+string(uid))
	if err := os.Rename(filepath.Join(root, string(uid)), aside); err != nil {
		m.log.Warn("set aside orphaned pod directory", "pod_uid", uid, "err", err)
		return "", false
	}
	return aside, true
}
