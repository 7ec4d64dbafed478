package cpumanager

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/cpuset"

	"nodeagent/internal/safefile"
)

// maxStateFile bounds what is read back of the checkpoint.
const maxStateFile = 4 << 20

// assignments are the exclusive CPUs by pod UID and container name.
type assignments map[types.UID]map[string]cpuset.CPUSet

// stateData is the kubelet's checkpoint payload (v4 "data").
type stateData struct {
	PolicyName    string                       `json:"policyName"`
	DefaultCPUSet string                       `json:"defaultCpuSet"`
	Entries       map[string]map[string]string `json:"entries,omitempty"`
}

// stateFile is cpu_manager_state in the kubelet's v4 layout: the payload
// as a JSON string with its checksum, which is what a 1.37 kubelet
// verifies, and the same fields outside it for older readers. Their
// legacy checksum (a hash of a Go-syntax dump of the kubelet's struct) is
// left 0: nodeagent reads and checks only the v4 one.
type stateFile struct {
	stateData
	Checksum     uint64 `json:"checksum"`
	Data         string `json:"data"`
	DataChecksum uint64 `json:"dataChecksum"`
}

// dataChecksum is the kubelet's checksum of the payload: FNV-32a of the
// string as its hash dump prints it.
func dataChecksum(data string) uint64 {
	h := fnv.New32a()
	h.Write([]byte("(string)" + data))
	return uint64(h.Sum32())
}

func encodeState(policy string, defaultSet cpuset.CPUSet, a assignments) ([]byte, error) {
	d := stateData{PolicyName: policy, DefaultCPUSet: defaultSet.String()}
	for uid, containers := range a {
		if d.Entries == nil {
			d.Entries = map[string]map[string]string{}
		}
		d.Entries[string(uid)] = map[string]string{}
		for name, set := range containers {
			d.Entries[string(uid)][name] = set.String()
		}
	}
	body, err := json.Marshal(d)
	if err != nil {
		return nil, err
	}
	return json.Marshal(stateFile{stateData: d, Data: string(body), DataChecksum: dataChecksum(string(body))})
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
	if f.Data == "" {
		return "", nil, errors.New("no v4 data (written before kubelet 1.35?)")
	}
	if want := dataChecksum(f.Data); f.DataChecksum != want {
		return "", nil, fmt.Errorf("checksum %d, want %d: the file was changed or torn", f.DataChecksum, want)
	}
	var d stateData
	if err := json.Unmarshal([]byte(f.Data), &d); err != nil {
		return "", nil, fmt.Errorf("decode data: %w", err)
	}
	if _, err := cpuset.Parse(d.DefaultCPUSet); err != nil {
		return "", nil, fmt.Errorf("defaultCpuSet %q: %w", d.DefaultCPUSet, err)
	}
	a = assignments{}
	for uid, containers := range d.Entries {
		a[types.UID(uid)] = map[string]cpuset.CPUSet{}
		for name, s := range containers {
			set, err := cpuset.Parse(s)
			if err != nil {
				return "", nil, fmt.Errorf("entries[%s][%s] %q: %w", uid, name, s, err)
			}
			a[types.UID(uid)][name] = set
		}
	}
	return d.PolicyName, a, nil
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
