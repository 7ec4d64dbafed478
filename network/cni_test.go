package network

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakePlugins writes shell-script CNI plugins that answer VERSION, so
// validation runs without the real plugins.
func fakePlugins(t *testing.T, names ...string) string {
	t.Helper()
	dir := t.TempDir()
	script := "#!/bin/sh\necho '{\"cniVersion\":\"1.0.0\",\"supportedVersions\":[\"0.3.1\",\"0.4.0\",\"1.0.0\"]}'\n"
	for _, n := range names {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestEnsureWritesBridgeWhenEmpty(t *testing.T) {
	bin := fakePlugins(t, "bridge", "host-local", "portmap", "loopback")
	conf := t.TempDir()
	res, err := Ensure(context.Background(), conf, []string{bin}, "10.99.0.0/16")
	if err != nil {
		t.Fatal(err)
	}
	if !res.Written || res.Name != NetworkName || res.File != filepath.Join(conf, ConfFile) {
		t.Errorf("result = %+v", res)
	}
	data, _ := os.ReadFile(res.File)
	for _, want := range []string{`"10.99.0.0/16"`, `"bridge"`, `"host-local"`, `"portmap"`, `"loopback"`, `"portMappings": true`} {
		if !strings.Contains(string(data), want) {
			t.Errorf("conflist lacks %s:\n%s", want, data)
		}
	}
	// A second call finds and keeps it.
	res, err = Ensure(context.Background(), conf, []string{bin}, "10.99.0.0/16")
	if err != nil || res.Written {
		t.Errorf("second Ensure: %+v, %v", res, err)
	}
}

func TestEnsureKeepsExistingAndReportsInvalid(t *testing.T) {
	bin := fakePlugins(t, "bridge", "host-local", "portmap", "loopback")
	conf := t.TempDir()
	other := filepath.Join(conf, "05-other.conflist")
	body := `{"cniVersion":"1.0.0","name":"other","plugins":[{"type":"bridge","bridge":"x0","ipam":{"type":"host-local","subnet":"10.5.0.0/16"}}]}`
	if err := os.WriteFile(other, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := Ensure(context.Background(), conf, []string{bin}, DefaultPodCIDR)
	if err != nil || res.Written || res.File != other || res.Name != "other" {
		t.Fatalf("existing config: %+v, %v", res, err)
	}
	if got, _ := os.ReadFile(other); string(got) != body {
		t.Error("existing config was modified")
	}

	if err := os.WriteFile(other, []byte(`{"cniVersion":"1.0.0","name":"other","plugins":[{"type":"macvlan-missing"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Ensure(context.Background(), conf, []string{bin}, DefaultPodCIDR)
	if err == nil || !strings.Contains(err.Error(), other) || !strings.Contains(err.Error(), "macvlan-missing") {
		t.Errorf("missing plugin: want an error naming the file and plugin, got %v", err)
	}

	if err := os.WriteFile(other, []byte(`{not json`), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Ensure(context.Background(), conf, []string{bin}, DefaultPodCIDR)
	if err == nil || !strings.Contains(err.Error(), other) {
		t.Errorf("bad JSON: want an error naming the file, got %v", err)
	}
	if _, err := os.Stat(filepath.Join(conf, ConfFile)); err == nil {
		t.Error("agent config written beside an existing one")
	}
}

func TestBridgeConfListRejectsBadCIDR(t *testing.T) {
	if _, err := BridgeConfList("10.0.0.0/99"); err == nil || !strings.Contains(err.Error(), "10.0.0.0/99") {
		t.Errorf("want error naming the CIDR, got %v", err)
	}
}

// A power loss while an older agent wrote the file (no fsync) left a
// zero-length 10-nodeagent.conflist, reported invalid at every start. The
// agent's own file is repaired; someone else's is still reported.
func TestEnsureRepairsItsOwnTornFile(t *testing.T) {
	bin := fakePlugins(t, "bridge", "host-local", "portmap", "loopback")
	for name, torn := range map[string]string{"empty": "", "cut": `{"cniVersion":"1.0.0","name":"nodea`} {
		t.Run(name, func(t *testing.T) {
			conf := t.TempDir()
			own := filepath.Join(conf, ConfFile)
			os.WriteFile(own, []byte(torn), 0o644)
			res, err := Ensure(context.Background(), conf, []string{bin}, DefaultPodCIDR)
			if err != nil || !res.Written || res.File != own {
				t.Fatalf("torn own file: %+v, %v", res, err)
			}
			if _, err := load(own); err != nil {
				t.Errorf("still invalid after repair: %v", err)
			}
			if entries, _ := os.ReadDir(conf); len(entries) != 1 {
				t.Errorf("left behind: %v", entries)
			}
		})
	}
	conf := t.TempDir()
	foreign := filepath.Join(conf, "05-other.conflist")
	os.WriteFile(foreign, nil, 0o644)
	if _, err := Ensure(context.Background(), conf, []string{bin}, DefaultPodCIDR); err == nil || !strings.Contains(err.Error(), "05-other.conflist is invalid") {
		t.Errorf("someone else's empty file: %v", err)
	}
}

// The Node's podCIDRs replace the range of the agent's own network, and
// only its own: someone else's network is kept whatever the range.
func TestEnsureRewritesItsOwnNetworkForNewCIDRs(t *testing.T) {
	bin := fakePlugins(t, "bridge", "host-local", "portmap", "loopback")
	conf := t.TempDir()
	if _, err := Ensure(context.Background(), conf, []string{bin}, DefaultPodCIDR); err != nil {
		t.Fatal(err)
	}
	res, err := Ensure(context.Background(), conf, []string{bin}, "10.244.3.0/24,fd00:10:244:3::/64")
	if err != nil || !res.Written || res.Replaced != DefaultPodCIDR {
		t.Fatalf("new CIDRs: %+v, %v", res, err)
	}
	list, err := load(res.File)
	if err != nil {
		t.Fatal(err)
	}
	if got := bridgeCIDRs(list); !sameCIDRs(got, "fd00:10:244:3::/64,10.244.3.0/24") {
		t.Errorf("bridge ranges = %s", got)
	}
	data, _ := os.ReadFile(res.File)
	for _, want := range []string{`"::/0"`, `"0.0.0.0/0"`, `"forceAddress": true`} {
		if !strings.Contains(string(data), want) {
			t.Errorf("conflist lacks %s:\n%s", want, data)
		}
	}
	// The same CIDRs in another order and spelling: nothing to do.
	if res, err := Ensure(context.Background(), conf, []string{bin}, "fd00:10:244:3:0::/64, 10.244.3.0/24"); err != nil || res.Written {
		t.Errorf("same CIDRs: %+v, %v", res, err)
	}
	// Empty CIDRs validate and write nothing.
	if res, err := Ensure(context.Background(), conf, []string{bin}, ""); err != nil || res.Written || res.File == "" {
		t.Errorf("no CIDRs: %+v, %v", res, err)
	}

	foreign := t.TempDir()
	body := `{"cniVersion":"1.0.0","name":"other","plugins":[{"type":"bridge","bridge":"x0","ipam":{"type":"host-local","subnet":"10.5.0.0/16"}}]}`
	os.WriteFile(filepath.Join(foreign, "05-other.conflist"), []byte(body), 0o644)
	if res, err := Ensure(context.Background(), foreign, []string{bin}, "10.244.3.0/24"); err != nil || res.Written || res.Name != "other" {
		t.Errorf("foreign network: %+v, %v", res, err)
	}
	empty := filepath.Join(t.TempDir(), "missing")
	if res, err := Ensure(context.Background(), empty, []string{bin}, ""); err != nil || res.File != "" {
		t.Errorf("no directory and no CIDRs: %+v, %v", res, err)
	}
	if _, err := os.Stat(empty); err == nil {
		t.Error("no CIDRs made the directory")
	}
}

func TestParseCIDRs(t *testing.T) {
	for _, bad := range []string{"", "10.0.0.0/8,10.1.0.0/16", "fd00::/64,fd01::/64", "10.0.0.0/8,", "nonsense"} {
		if _, err := ParseCIDRs(bad); err == nil {
			t.Errorf("ParseCIDRs(%q) accepted", bad)
		}
	}
	if got, err := ParseCIDRs("10.244.0.0/24,fd00::/64"); err != nil || len(got) != 2 {
		t.Errorf("dual stack: %v, %v", got, err)
	}
}
