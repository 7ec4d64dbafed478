package allocation

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"log/slog"
	"maps"
	"sync"

	"k8s.io/apimachinery/pkg/types"

	"nodeagent/internal/safefile"
)

// maxFile bounds what is read back: 110 pods of ten containers take about
// 300 KiB.
const maxFile = 16 << 20

// Store is one checkpoint file of Resources by pod UID. Every change is
// written before it is reported done, atomically; a file that does not
// read back (torn, edited, wrong checksum) is logged with its path and the
// store starts empty, to be refilled from the pods the agent runs.
type Store struct {
	path string
	log  *slog.Logger

	mu      sync.Mutex
	entries map[types.UID]Resources
}

// file is allocated_pods_state in the kubelet's layout (its allocation
// state Checkpoint): the entries as a JSON string, and the string's
// checksum as the kubelet computes it. A kubelet started on this root
// directory reads it; it panics on a file it cannot.
type file struct {
	Data     string `json:"data"`
	Checksum uint64 `json:"checksum"`
}

type payload struct {
	Entries map[types.UID]Resources `json:"entries,omitempty"`
}

// Open reads the checkpoint at path, if there is one.
func Open(path string, log *slog.Logger) *Store {
	s := &Store{path: path, log: log, entries: map[types.UID]Resources{}}
	entries, err := read(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		log.Warn("allocation checkpoint unreadable; rebuilding it from the running pods", "file", path, "err", err)
	default:
		s.entries = entries
	}
	return s
}

func read(path string) (map[types.UID]Resources, error) {
	b, err := safefile.Read(path, maxFile)
	if err != nil {
		return nil, err
	}
	var f file
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	if sum := checksum(f.Data); sum != f.Checksum {
		return nil, fmt.Errorf("checksum %d, want %d: the file was changed or torn", f.Checksum, sum)
	}
	var p payload
	if err := json.Unmarshal([]byte(f.Data), &p); err != nil {
		return nil, fmt.Errorf("decode entries: %w", err)
	}
	if p.Entries == nil {
		p.Entries = map[types.UID]Resources{}
	}
	return p.Entries, nil
}

// checksum is the kubelet's checkpoint checksum of a string: FNV-32a of
// the string as its hash dump prints it.
func checksum(data string) uint64 {
	h := fnv.New32a()
	h.Write([]byte("(string)" + data))
	return uint64(h.Sum32())
}

// Get is the pod's entry.
func (s *Store) Get(uid types.UID) (Resources, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.entries[uid]
	return r, ok
}

// Set records the pod's entry and writes the file if it changed.
func (s *Store) Set(uid types.UID, r Resources) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.entries[uid]; ok && old.Equal(r) {
		return nil
	}
	next := maps.Clone(s.entries)
	next[uid] = r
	return s.writeLocked(next)
}

// Retain drops the entries of pods not in keep, writing the file if any
// went.
func (s *Store) Retain(keep func(types.UID) bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	next := maps.Clone(s.entries)
	maps.DeleteFunc(next, func(uid types.UID, _ Resources) bool { return !keep(uid) })
	if len(next) == len(s.entries) {
		return nil
	}
	return s.writeLocked(next)
}

// writeLocked writes entries and, once they are on disk, takes them.
func (s *Store) writeLocked(entries map[types.UID]Resources) error {
	body, err := json.Marshal(payload{Entries: entries})
	if err != nil {
		return err
	}
	b, err := json.Marshal(file{Data: string(body), Checksum: checksum(string(body))})
	if err != nil {
		return err
	}
	if err := safefile.Write(s.path, b, 0o600); err != nil {
		return fmt.Errorf("write allocation checkpoint %s: %w", s.path, err)
	}
	s.entries = entries
	return nil
}
