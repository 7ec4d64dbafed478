package cpumanager

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/cpuset"

	"nodeagent/internal/safefile"
)

// maxStateFile bounds what is read back of the checkpoint.
const maxStateFile = 4 << 20

// assignments are the exclusive CPUs by pod UID and container name.
type assignments map[types.UID]map[string]cpuset.CPUSet

// stateFile is cpu_manager_state with the kubelet's field names. The
// checksum is FNV-32a of the file with checksum 0 (the kubelet hashes a
// Go-syntax dump of its struct), so a kubelet does not take nodeagent's
// file for its own.
type stateFile struct {
	PolicyName    string                       `json:"policyName"`
	DefaultCPUSet string                       `json:"defaultCpuSet"`
	Entries       map[string]map[string]string `json:"entries,omitempty"`
	Checksum      uint32                       `json:"checksum"`
}

func encodeState(policy string, defaultSet cpuset.CPUSet, a assignments) ([]byte, error) {
	f := stateFile{PolicyName: policy, DefaultCPUSet: defaultSet.String()}
	for _, uid := range slices.Sorted(maps.Keys(a)) {
		if f.Entries == nil {
			f.Entries = map[string]map[string]string{}
		}
		f.Entries[string(uid)] = map[string]string{}
		for name, set := range a[uid] {
			f.Entries[string(uid)][name] = set.String()
		}
	}
	body, err := json.Marshal(f)
	if err != nil {
		return nil, err
	}
	f.Checksum = checksum(body)
	return json.Marshal(f)
}

func checksum(b []byte) uint32 {
	h := fnv.New32a()
	h.Write(b)
	return h.Sum32()
}

// readState reads the checkpoint at path: its policy and assignments.
func readState(path string) (policy string, a assignments, err error) {
	b, err := safefile.Read(path, maxStateFile)
	if err != nil {
		return "", nil, err
	}
	var f stateFile
	if err := json.Unmarshal(b, &f); err != nil {
		return "", nil, fmt.Errorf("decode: %w", err)
	}
	got := f.Checksum
	f.Checksum = 0
	body, err := json.Marshal(f)
	if err != nil {
		return "", nil, err
	}
	if want := checksum(body); got != want {
		return "", nil, fmt.Errorf("checksum %d, want %d: the file was changed or torn", got, want)
	}
	if _, err := cpuset.Parse(f.DefaultCPUSet); err != nil {
		return "", nil, fmt.Errorf("defaultCpuSet %q: %w", f.DefaultCPUSet, err)
	}
	a = assignments{}
	for uid, containers := range f.Entries {
		a[types.UID(uid)] = map[string]cpuset.CPUSet{}
		for name, s := range containers {
			set, err := cpuset.Parse(s)
			if err != nil {
				return "", nil, fmt.Errorf("entries[%s][%s] %q: %w", uid, name, s, err)
			}
			a[types.UID(uid)][name] = set
		}
	}
	return f.PolicyName, a, nil
}

func writeState(path, policy string, defaultSet cpuset.CPUSet, a assignments) error {
	b, err := encodeState(policy, defaultSet, a)
	if err != nil {
		return err
	}
	if err := safefile.Write(path, b, 0o600); err != nil {
		return fmt.Errorf("write CPU manager checkpoint %s: %w", path, err)
	}
	return nil
}
