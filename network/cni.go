package network

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/containernetworking/cni/libcni"

	"nodeagent/internal/safefile"
)

const (
	// NetworkName is the name of the network the agent writes.
	NetworkName = "nodeagent"
	// BridgeName is the host bridge the pods attach to.
	BridgeName = "nodeagent0"
	// ConfFile is the file the agent writes in the configuration directory.
	ConfFile = "10-nodeagent.conflist"
	// DefaultPodCIDR is used when the configuration names none.
	DefaultPodCIDR = "10.88.0.0/16"
)

var confExtensions = []string{".conf", ".conflist", ".json"}

// BridgeConfList is the agent's default pod network: a bridge with
// host-local addresses from the pod CIDRs (comma-separated, one per
// family: the Node's spec.podCIDRs; gateway on the bridge, masquerade for
// traffic leaving the range), portmap for hostPort mappings, and loopback.
// forceAddress lets the bridge take a new range's gateway in place of the
// old one's.
func BridgeConfList(podCIDRs string) ([]byte, error) {
	cidrs, err := ParseCIDRs(podCIDRs)
	if err != nil {
		return nil, err
	}
	var ranges [][]map[string]string
	var routes []map[string]string
	for _, c := range cidrs {
		ranges = append(ranges, []map[string]string{{"subnet": c.String()}})
		route := "0.0.0.0/0"
		if c.IP.To4() == nil {
			route = "::/0"
		}
		routes = append(routes, map[string]string{"dst": route})
	}
	conf := map[string]any{
		"cniVersion": "1.0.0",
		"name":       NetworkName,
		"plugins": []map[string]any{
			{
				"type":         "bridge",
				"bridge":       BridgeName,
				"isGateway":    true,
				"ipMasq":       true,
				"hairpinMode":  true,
				"forceAddress": true,
				"ipam":         map[string]any{"type": "host-local", "ranges": ranges, "routes": routes},
			},
			{"type": "portmap", "capabilities": map[string]bool{"portMappings": true}},
			{"type": "loopback"},
		},
	}
	return json.MarshalIndent(conf, "", "  ")
}

// ParseCIDRs reads comma-separated pod CIDRs: one or two, at most one per
// IP family, as the API server allows in a Node's spec.podCIDRs.
func ParseCIDRs(podCIDRs string) ([]*net.IPNet, error) {
	var out []*net.IPNet
	families := map[bool]bool{}
	for _, c := range strings.Split(podCIDRs, ",") {
		_, n, err := net.ParseCIDR(strings.TrimSpace(c))
		if err != nil {
			return nil, fmt.Errorf("pod CIDR %q: %w", c, err)
		}
		v4 := n.IP.To4() != nil
		if families[v4] {
			return nil, fmt.Errorf("pod CIDRs %q: at most one per IP family", podCIDRs)
		}
		families[v4] = true
		out = append(out, n)
	}
	return out, nil
}

// Result says what Ensure found or did.
type Result struct {
	File    string // the configuration in effect; empty when there is none
	Name    string // its network name
	Written bool   // true when the agent wrote it now
	// Replaced is the pod CIDRs of the agent's own configuration that
	// Written replaced; empty when it was written anew.
	Replaced string
}

// Ensure makes confDir hold a valid network. With no configuration the
// agent's bridge network for podCIDRs is written; the agent's own
// configuration for other CIDRs is written again for these; anyone else's
// first configuration (in the runtime's lexical order) is validated
// against the plugins in binDirs and left untouched. An invalid
// configuration is an error naming the file. Empty podCIDRs write
// nothing: what is there is validated.
func Ensure(ctx context.Context, confDir string, binDirs []string, podCIDRs string) (Result, error) {
	files, err := libcni.ConfFiles(confDir, confExtensions)
	if err != nil {
		return Result{}, fmt.Errorf("read CNI configuration directory %s: %w", confDir, err)
	}
	var replaced string
	if len(files) > 0 && filepath.Base(files[0]) == ConfFile {
		list, err := load(files[0])
		switch {
		case err != nil:
			// Left empty or torn by a crash of an older agent (which
			// wrote without fsync): written anew, not reported as
			// invalid forever.
			files = files[1:]
		case podCIDRs != "" && !sameCIDRs(bridgeCIDRs(list), podCIDRs):
			replaced, files = bridgeCIDRs(list), files[1:]
		}
	}
	if len(files) > 0 {
		file := files[0]
		list, err := load(file)
		if err != nil {
			return Result{File: file}, fmt.Errorf("CNI configuration %s is invalid: %w", file, err)
		}
		if err := validate(ctx, list, binDirs); err != nil {
			return Result{File: file, Name: list.Name}, fmt.Errorf("CNI configuration %s is invalid: %w", file, err)
		}
		return Result{File: file, Name: list.Name}, nil
	}
	if podCIDRs == "" {
		return Result{}, nil
	}

	data, err := BridgeConfList(podCIDRs)
	if err != nil {
		return Result{}, err
	}
	list, err := libcni.ConfListFromBytes(data)
	if err != nil {
		return Result{}, fmt.Errorf("build CNI configuration: %w", err)
	}
	if err := validate(ctx, list, binDirs); err != nil {
		return Result{}, fmt.Errorf("CNI plugins in %v cannot run the bridge network: %w", binDirs, err)
	}
	file := filepath.Join(confDir, ConfFile)
	if err := os.MkdirAll(confDir, 0o755); err != nil {
		return Result{}, err
	}
	if err := safefile.Write(file, data, 0o644); err != nil {
		return Result{}, fmt.Errorf("write CNI configuration: %w", err)
	}
	return Result{File: file, Name: list.Name, Written: true, Replaced: replaced}, nil
}

// bridgeCIDRs are the subnets of the agent's bridge network, comma-separated.
func bridgeCIDRs(list *libcni.NetworkConfigList) string {
	var out []string
	for _, p := range list.Plugins {
		var conf struct {
			IPAM struct {
				Ranges [][]struct {
					Subnet string `json:"subnet"`
				} `json:"ranges"`
			} `json:"ipam"`
		}
		if p.Network.Type != "bridge" || json.Unmarshal(p.Bytes, &conf) != nil {
			continue
		}
		for _, r := range conf.IPAM.Ranges {
			for _, sub := range r {
				out = append(out, sub.Subnet)
			}
		}
	}
	return strings.Join(out, ",")
}

// sameCIDRs compares two comma-separated CIDR lists as sets of networks.
func sameCIDRs(a, b string) bool {
	norm := func(s string) []string {
		var out []string
		for _, c := range strings.Split(s, ",") {
			if _, n, err := net.ParseCIDR(strings.TrimSpace(c)); err == nil {
				out = append(out, n.String())
			} else {
				out = append(out, c)
			}
		}
		slices.Sort(out)
		return out
	}
	return slices.Equal(norm(a), norm(b))
}

func load(file string) (*libcni.NetworkConfigList, error) {
	if filepath.Ext(file) == ".conflist" {
		return libcni.ConfListFromFile(file)
	}
	//lint:ignore SA1019 the runtime (containerd's go-cni) still loads single-plugin .conf files, so the agent reads them too
	conf, err := libcni.ConfFromFile(file)
	if err != nil {
		return nil, err
	}
	//lint:ignore SA1019 as ConfFromFile above
	return libcni.ConfListFromConf(conf)
}

func validate(ctx context.Context, list *libcni.NetworkConfigList, binDirs []string) error {
	if len(list.Plugins) == 0 {
		return fmt.Errorf("network %q has no plugins", list.Name)
	}
	cni := libcni.NewCNIConfig(binDirs, nil)
	_, err := cni.ValidateNetworkList(ctx, list)
	return err
}
