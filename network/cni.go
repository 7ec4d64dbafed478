package network

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"

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
// host-local addresses from podCIDR (gateway on the bridge, masquerade for
// traffic leaving the range), portmap for hostPort mappings, and loopback.
func BridgeConfList(podCIDR string) ([]byte, error) {
	if _, _, err := net.ParseCIDR(podCIDR); err != nil {
		return nil, fmt.Errorf("podCIDR %q: %w", podCIDR, err)
	}
	defaultRoute := "0.0.0.0/0"
	if ip, _, _ := net.ParseCIDR(podCIDR); ip.To4() == nil {
		defaultRoute = "::/0"
	}
	conf := map[string]any{
		"cniVersion": "1.0.0",
		"name":       NetworkName,
		"plugins": []map[string]any{
			{
				"type":        "bridge",
				"bridge":      BridgeName,
				"isGateway":   true,
				"ipMasq":      true,
				"hairpinMode": true,
				"ipam": map[string]any{
					"type":   "host-local",
					"ranges": [][]map[string]string{{{"subnet": podCIDR}}},
					"routes": []map[string]string{{"dst": defaultRoute}},
				},
			},
			{"type": "portmap", "capabilities": map[string]bool{"portMappings": true}},
			{"type": "loopback"},
		},
	}
	return json.MarshalIndent(conf, "", "  ")
}

// Result says what Ensure found or did.
type Result struct {
	File    string // the configuration in effect
	Name    string // its network name
	Written bool   // true when the agent wrote it now
}

// Ensure makes confDir hold a valid network. An empty directory gets the
// agent's bridge network for podCIDR; otherwise the first configuration (in
// the runtime's lexical order) is validated against the plugins in binDirs
// and left untouched. An invalid configuration is an error naming the file.
func Ensure(ctx context.Context, confDir string, binDirs []string, podCIDR string) (Result, error) {
	files, err := libcni.ConfFiles(confDir, confExtensions)
	if err != nil {
		return Result{}, fmt.Errorf("read CNI configuration directory %s: %w", confDir, err)
	}
	// The agent's own file, left empty or torn by a crash of an older
	// agent (which wrote without fsync), is written anew, not reported
	// as invalid forever.
	if len(files) > 0 && filepath.Base(files[0]) == ConfFile {
		if _, err := load(files[0]); err != nil {
			files = files[1:]
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

	data, err := BridgeConfList(podCIDR)
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
	return Result{File: file, Name: list.Name, Written: true}, nil
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
