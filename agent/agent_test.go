package agent

import (
	"strings"
	"testing"
)

// The shape of containerd 1.6's verbose CRI status config.
func runtimeInfo(systemd bool) map[string]string {
	v := "false"
	if systemd {
		v = "true"
	}
	return map[string]string{"config": `{"containerd":{"defaultRuntimeName":"runc","runtimes":{"runc":{"runtimeType":"io.containerd.runc.v2","options":{"SystemdCgroup":` + v + `}}}},"systemdCgroup":false}`}
}

func TestCheckDriverAgreement(t *testing.T) {
	if err := checkDriverAgreement("cgroupfs", runtimeInfo(false)); err != nil {
		t.Error(err)
	}
	if err := checkDriverAgreement("systemd", runtimeInfo(true)); err != nil {
		t.Error(err)
	}
	err := checkDriverAgreement("cgroupfs", runtimeInfo(true))
	if err == nil || !strings.Contains(err.Error(), `nodeagent uses "cgroupfs" (cgroupDriver) but the container runtime uses "systemd"`) {
		t.Errorf("mismatch: %v", err)
	}
	if err := checkDriverAgreement("systemd", map[string]string{}); err != nil {
		t.Errorf("a runtime that does not say must not block: %v", err)
	}
}
