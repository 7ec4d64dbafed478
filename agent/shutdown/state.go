package shutdown

import (
	"encoding/json"
	"errors"
	"os"
	"time"

	"nodeagent/internal/safefile"
)

// state is the kubelet's graceful_node_shutdown_state: when the last
// shutdown's pod stopping began and ended (zero while under way).
type state struct {
	StartTime time.Time `json:"startTime"`
	EndTime   time.Time `json:"endTime"`
}

func loadState(path string) (state, error) {
	var st state
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return st, err
	}
	return st, json.Unmarshal(b, &st)
}

func saveState(path string, st state) error {
	if path == "" {
		return nil
	}
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	return safefile.Write(path, b, 0o644)
}
