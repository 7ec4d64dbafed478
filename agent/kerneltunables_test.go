package agent

import (
	"io"
	"log/slog"
	"strings"
	"testing"

	"k8s.io/component-helpers/node/util/sysctl"
	sysctltesting "k8s.io/component-helpers/node/util/sysctl/testing"
)

// The kubelet's kernel settings are written at start, or with
// protectKernelDefaults checked: a host value that differs stops the agent
// with the flag, both values and the field named.
func TestSetupKernelTunables(t *testing.T) {
	discard := slog.New(slog.NewTextHandler(io.Discard, nil))
	host := func() *sysctltesting.Fake {
		f := kernelAsWanted()
		f.Settings[sysctl.VMOvercommitMemory] = 0 // this build host's
		f.Settings[sysctl.KernelPanic] = 1
		return f
	}

	f := host()
	if err := setupKernelTunables(f, false, discard); err != nil {
		t.Fatal(err)
	}
	if f.Settings[sysctl.VMOvercommitMemory] != 1 || f.Settings[sysctl.KernelPanic] != 10 || f.Settings[sysctl.KernelPanicOnOops] != 1 {
		t.Errorf("after start: %v, want overcommit 1, panic 10, panic_on_oops 1", f.Settings)
	}

	f = host()
	err := setupKernelTunables(f, true, discard)
	if err == nil || !strings.Contains(err.Error(), "vm/overcommit_memory, expected value: 1, actual value: 0") || !strings.Contains(err.Error(), "protectKernelDefaults") {
		t.Errorf("protected, differing: %v, want an error naming the flag, both values and the field", err)
	}
	if f.Settings[sysctl.VMOvercommitMemory] != 0 {
		t.Error("protectKernelDefaults: the host's value was changed")
	}
	if err := setupKernelTunables(f, false, discard); err != nil {
		t.Fatal(err)
	}
	if err := setupKernelTunables(f, true, discard); err != nil {
		t.Errorf("protected, all as wanted: %v", err)
	}

	delete(f.Settings, sysctl.RootMaxKeys)
	if err := setupKernelTunables(f, false, discard); err == nil || !strings.Contains(err.Error(), sysctl.RootMaxKeys) {
		t.Errorf("unreadable flag: %v, want an error naming it", err)
	}
}

// kernelAsWanted is a kernel whose settings are the kubelet's already.
func kernelAsWanted() *sysctltesting.Fake {
	f := sysctltesting.NewFake()
	for _, k := range kernelTunables {
		f.Settings[k.name] = k.value
	}
	return f
}
