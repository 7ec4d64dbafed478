package pods

import (
	"encoding/base64"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestRegistryMatches(t *testing.T) {
	for _, c := range []struct {
		key, domain, repo string
		want              bool
	}{
		{"127.0.0.1:5050", "127.0.0.1:5050", "nodeagent/test", true},
		{"http://127.0.0.1:5050/", "127.0.0.1:5050", "nodeagent/test", true},
		{"127.0.0.1:5050", "127.0.0.1:5001", "nodeagent/test", false},
		{"https://index.docker.io/v1/", "docker.io", "library/busybox", true},
		{"registry.example.com/team", "registry.example.com", "team/app", true},
		{"registry.example.com/team", "registry.example.com", "teamwork/app", false},
		{"*.example.com", "registry.example.com", "app", true},
		{"*.example.com", "example.com", "app", false},
		{"example.com", "evil-example.com", "app", false},
	} {
		if got := registryMatches(c.key, c.domain, c.repo); got != c.want {
			t.Errorf("registryMatches(%q, %q, %q) = %v, want %v", c.key, c.domain, c.repo, got, c.want)
		}
	}
}

func TestParseDockerConfig(t *testing.T) {
	auth := base64.StdEncoding.EncodeToString([]byte("u:p:with-colon"))
	s := &corev1.Secret{Type: corev1.SecretTypeDockerConfigJson, Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{"r.io":{"auth":"` + auth + `"}}}`)}}
	creds, err := parseDockerConfig(s)
	if err != nil {
		t.Fatal(err)
	}
	a := creds["r.io"].authConfig()
	if a.Username != "u" || a.Password != "p:with-colon" || a.ServerAddress != "" {
		t.Errorf("auth decoded to %+v", a)
	}
	old := &corev1.Secret{Type: corev1.SecretTypeDockercfg, Data: map[string][]byte{corev1.DockerConfigKey: []byte(`{"r.io":{"username":"x","password":"y"}}`)}}
	if creds, err := parseDockerConfig(old); err != nil || creds["r.io"].Username != "x" {
		t.Errorf("dockercfg: %v %v", creds, err)
	}
	if _, err := parseDockerConfig(&corev1.Secret{Type: corev1.SecretTypeOpaque}); err == nil {
		t.Error("a secret without a docker config parsed")
	}
}
