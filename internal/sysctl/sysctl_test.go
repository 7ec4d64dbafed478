package sysctl

import "testing"

func TestNamespaceAndDots(t *testing.T) {
	for name, want := range map[string]string{
		"kernel.shm_rmid_forced": "ipc", "kernel.msgmax": "ipc", "kernel.sem": "ipc", "fs.mqueue.msg_max": "ipc",
		"net.ipv4.ip_forward": "net", "kernel.panic": "", "vm.swappiness": "",
	} {
		if got := Namespace(name); got != want {
			t.Errorf("Namespace(%q) = %q, want %q", name, got, want)
		}
	}
	for in, want := range map[string]string{
		"kernel/shm_rmid_forced":           "kernel.shm_rmid_forced",
		"net/ipv4/conf/eno2.100/rp_filter": "net.ipv4.conf.eno2/100.rp_filter",
		"net.ipv4.ip_forward":              "net.ipv4.ip_forward",
	} {
		if got := Dots(in); got != want {
			t.Errorf("Dots(%q) = %q, want %q", in, got, want)
		}
	}
}
