package launch

import (
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

func TestWithConfigCallerFieldsReplaceTheLaunchers(t *testing.T) {
	base := "kind: KubeletConfiguration\nfileCheckFrequency: 20s\nport: 10250\nevictionHard: {memory.available: 100Mi}\n"
	out, err := withConfig(base, "fileCheckFrequency: 10s\nevictionHard: {nodefs.available: 10%}\n")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(out, "fileCheckFrequency") != 1 {
		t.Fatalf("a field twice:\n%s", out)
	}
	var got map[string]any
	if err := yaml.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	hard, _ := got["evictionHard"].(map[string]any)
	if got["fileCheckFrequency"] != "10s" || got["port"] != float64(10250) || got["kind"] != "KubeletConfiguration" ||
		len(hard) != 1 || hard["nodefs.available"] != "10%" {
		t.Fatalf("merged configuration: %v", got)
	}
	if same, _ := withConfig(base, "  \n"); same != base {
		t.Fatalf("no caller fields changed the configuration:\n%s", same)
	}
	if _, err := withConfig(base, "- a list"); err == nil || !strings.Contains(err.Error(), "Config") {
		t.Fatalf("a list as Config: %v", err)
	}
}
