package cgroups

import "testing"

func TestNames(t *testing.T) {
	n := Name{"kubepods", "burstable", "pod1234-abcd-5678-efgh"}
	if got := n.Cgroupfs(); got != "/kubepods/burstable/pod1234-abcd-5678-efgh" {
		t.Errorf("Cgroupfs = %q", got)
	}
	if got, want := n.Systemd(), "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1234_abcd_5678_efgh.slice"; got != want {
		t.Errorf("Systemd = %q, want %q", got, want)
	}
	if got, want := (Name{"kubepods", "pod1-2"}).Systemd(), "/kubepods.slice/kubepods-pod1_2.slice"; got != want {
		t.Errorf("guaranteed Systemd = %q, want %q", got, want)
	}
	if got := (Name{}).Systemd(); got != "/" {
		t.Errorf("root Systemd = %q", got)
	}
	for in, want := range map[string]string{"/": "/", "": "/", "/a/b/": "/a/b", "a//b": "/a/b"} {
		if got := ParseCgroupfs(in).Cgroupfs(); got != want {
			t.Errorf("ParseCgroupfs(%q) = %q, want %q", in, got, want)
		}
	}
	if err := (Name{"a_b"}).Validate(); err == nil {
		t.Error("'_' must be refused")
	}
	if err := (Name{"kubepods", "podx"}).Validate(); err != nil {
		t.Error(err)
	}
	child := n.Child("x")
	child2 := n.Child("y")
	if child[3] != "x" || child2[3] != "y" || len(n) != 3 {
		t.Error("Child must not alias its parent")
	}
}

func TestContainerIDOfACgroupDirectory(t *testing.T) {
	for dir, want := range map[string]string{
		"3f2a9c":                                "3f2a9c", // cgroupfs driver
		"cri-containerd-3f2a9c.scope":           "3f2a9c", // systemd driver
		"crio-3f2a9c.scope":                     "3f2a9c",
		"kubepods-besteffort-pod1234abcd.slice": "pod1234abcd.slice",
	} {
		if got := ContainerIDOf(dir); got != want {
			t.Errorf("ContainerIDOf(%q) = %q, want %q", dir, got, want)
		}
	}
}
