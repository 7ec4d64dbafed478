package pods

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/distribution/reference"
	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"nodeagent/agent/images/pullrecords"
)

// registryCredential is one entry of a docker config.
type registryCredential struct {
	Username      string `json:"username"`
	Password      string `json:"password"`
	Auth          string `json:"auth"`
	IdentityToken string `json:"identitytoken"`
	RegistryToken string `json:"registrytoken"`
}

// podCredential is one credential of a pod's pull secrets, with the
// secret it came from, as image pull records name it.
type podCredential struct {
	auth   *runtimeapi.AuthConfig
	secret pullrecords.Secret
}

// pullCredentials are the credentials of the pod's imagePullSecrets whose
// registry matches image, most specific first, as the kubelet's keyring
// orders them; none means an anonymous pull. Secrets that are missing or
// do not parse are skipped with the kubelet's event.
func (w *worker) pullCredentials(ctx context.Context, pod *corev1.Pod, image string) []podCredential {
	if len(pod.Spec.ImagePullSecrets) == 0 || w.m.objects == nil {
		return nil
	}
	named, err := reference.ParseNormalizedNamed(image)
	if err != nil {
		return nil
	}
	type match struct {
		key  string
		cred podCredential
	}
	var matches []match
	var missing []string
	for _, ref := range pod.Spec.ImagePullSecrets {
		s, err := w.m.objects.Secret(ctx, pod.Namespace, ref.Name)
		if err != nil {
			missing = append(missing, ref.Name)
			continue
		}
		creds, err := parseDockerConfig(s)
		if err != nil {
			w.log.Warn("image pull secret does not parse; skipped", "secret", ref.Name, "err", err)
			continue
		}
		for key, c := range creds {
			if registryMatches(key, reference.Domain(named), reference.Path(named)) {
				auth := c.authConfig()
				matches = append(matches, match{key, podCredential{auth: auth,
					secret: pullrecords.Secret{UID: string(s.UID), Namespace: s.Namespace, Name: s.Name, CredentialHash: credentialHash(auth)}}})
			}
		}
	}
	if len(missing) > 0 {
		w.event("", corev1.EventTypeWarning, "FailedToRetrieveImagePullSecret",
			fmt.Sprintf("Unable to retrieve some image pull secrets (%s); attempting to pull the image may not succeed.", strings.Join(missing, ", ")))
	}
	slices.SortStableFunc(matches, func(a, b match) int { return len(b.key) - len(a.key) })
	out := make([]podCredential, len(matches))
	for i, m := range matches {
		out[i] = m.cred
	}
	return out
}

// credentialHash identifies a credential in image pull records: two
// secrets holding the same credential are the same to a registry.
func credentialHash(a *runtimeapi.AuthConfig) string {
	b, _ := json.Marshal(struct {
		Username      string `json:"username,omitempty"`
		Password      string `json:"password,omitempty"`
		IdentityToken string `json:"identitytoken,omitempty"`
		RegistryToken string `json:"registrytoken,omitempty"`
	}{a.Username, a.Password, a.IdentityToken, a.RegistryToken})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// parseDockerConfig reads a kubernetes.io/dockerconfigjson or
// kubernetes.io/dockercfg secret.
func parseDockerConfig(s *corev1.Secret) (map[string]registryCredential, error) {
	if b, ok := s.Data[corev1.DockerConfigJsonKey]; ok {
		var cfg struct {
			Auths map[string]registryCredential `json:"auths"`
		}
		if err := json.Unmarshal(b, &cfg); err != nil {
			return nil, fmt.Errorf("%s: %w", corev1.DockerConfigJsonKey, err)
		}
		return cfg.Auths, nil
	}
	if b, ok := s.Data[corev1.DockerConfigKey]; ok {
		var cfg map[string]registryCredential
		if err := json.Unmarshal(b, &cfg); err != nil {
			return nil, fmt.Errorf("%s: %w", corev1.DockerConfigKey, err)
		}
		return cfg, nil
	}
	return nil, fmt.Errorf("neither %s nor %s is set (type %s)", corev1.DockerConfigJsonKey, corev1.DockerConfigKey, s.Type)
}

// authConfig is the credential as the CRI takes it; "auth" (base64 of
// user:password) fills a missing user name and password. The server
// address stays empty, as the kubelet leaves it: containerd parses it as a
// URL, which a docker config key ("host:port") is not.
func (c registryCredential) authConfig() *runtimeapi.AuthConfig {
	user, pass := c.Username, c.Password
	if user == "" && pass == "" && c.Auth != "" {
		if b, err := base64.StdEncoding.DecodeString(c.Auth); err == nil {
			user, pass, _ = strings.Cut(string(b), ":")
		}
	}
	return &runtimeapi.AuthConfig{Username: user, Password: pass, IdentityToken: c.IdentityToken, RegistryToken: c.RegistryToken}
}

// registryMatches reports whether a docker config key (a registry host,
// optionally with a scheme, a path and globs in the host) covers the image
// at domain/repo.
func registryMatches(key, domain, repo string) bool {
	key = strings.TrimPrefix(strings.TrimPrefix(key, "https://"), "http://")
	host, keyPath, _ := strings.Cut(strings.TrimSuffix(key, "/"), "/")
	switch host {
	case "index.docker.io", "registry-1.docker.io":
		host = "docker.io"
	}
	if keyPath == "v1" || keyPath == "v2" {
		keyPath = ""
	}
	hostParts, domainParts := strings.Split(host, "."), strings.Split(domain, ".")
	if len(hostParts) != len(domainParts) {
		return false
	}
	for i := range hostParts {
		if ok, err := path.Match(hostParts[i], domainParts[i]); err != nil || !ok {
			return false
		}
	}
	return keyPath == "" || repo == keyPath || strings.HasPrefix(repo, keyPath+"/")
}
