package version

import (
	"strings"
	"testing"

	utilversion "k8s.io/apimachinery/pkg/util/version"
)

func TestKubeletVersionIsSemver(t *testing.T) {
	for _, v := range []string{"0.1.0", "dev", "0.2.0-rc.1+dirty/x", ""} {
		Version = v
		kv := KubeletVersion()
		parsed, err := utilversion.ParseSemantic(kv)
		if err != nil {
			t.Errorf("Version %q: kubeletVersion %q is not semver: %v", v, kv, err)
			continue
		}
		if want := "1." + Kubernetes[2:]; parsed.Major() != 1 || !strings.HasPrefix(kv, "v"+want+".") {
			t.Errorf("kubeletVersion %q is not Kubernetes %s", kv, want)
		}
		if !strings.Contains(kv, "+nodeagent.") || parsed.PreRelease() != "" {
			t.Errorf("kubeletVersion %q: want the agent's version as build metadata only", kv)
		}
	}
}
