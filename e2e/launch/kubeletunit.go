package launch

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"nodeagent/e2e/standin"
)

// unitName is the control kubelet's stand-in unit: the upstream suite
// finds the kubelet's service as kubelet-\w+.
const unitName = "kubelet-control"

// startUnit writes the stand-in unit (KubeletOptions.Unit) for argv and
// starts the kubelet through it, as the suite's systemctl will restart it.
func (k *Kubelet) startUnit(argv []string) error {
	u := &standin.Unit{Name: unitName, Argv: argv, Config: k.UnitConfig,
		PIDFile: filepath.Join(k.Dir, "kubelet.pid"), Log: k.LogPath()}
	b, err := json.MarshalIndent(u, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(k.Unit, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("unit file: %w", err)
	}
	// An earlier run's suite configuration is not this run's.
	if k.UnitConfig != "" {
		if err := os.Remove(k.UnitConfig); err != nil && !os.IsNotExist(err) {
			return err
		}
	}
	k.unit = u
	return u.Start()
}

// stopUnit stops the kubelet the unit runs now (the suite may have
// restarted it), as the process is stopped otherwise.
func (k *Kubelet) stopUnit() {
	if err := k.unit.Stop(30 * time.Second); err != nil {
		fmt.Fprintf(os.Stderr, "launch: %v\n", err)
	}
	k.unit = nil
}
