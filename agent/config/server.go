package config

import (
	"crypto/tls"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
)

// serverDefaults are the kubelet's KubeletConfiguration defaults for its
// authenticated server: port 10250, webhook authentication (anonymous
// off) and webhook authorization, with the kubelet's cache lifetimes.
func serverDefaults(c *kubeletv1beta1.KubeletConfiguration) {
	yes, no := true, false
	c.Port = 10250
	c.Authentication = kubeletv1beta1.KubeletAuthentication{
		Anonymous: kubeletv1beta1.KubeletAnonymousAuthentication{Enabled: &no},
		Webhook:   kubeletv1beta1.KubeletWebhookAuthentication{Enabled: &yes, CacheTTL: metav1.Duration{Duration: 2 * time.Minute}},
	}
	c.Authorization = kubeletv1beta1.KubeletAuthorization{
		Mode: kubeletv1beta1.KubeletAuthorizationModeWebhook,
		Webhook: kubeletv1beta1.KubeletWebhookAuthorization{
			CacheAuthorizedTTL:   metav1.Duration{Duration: 5 * time.Minute},
			CacheUnauthorizedTTL: metav1.Duration{Duration: 30 * time.Second},
		},
	}
}

// tlsVersions are tlsMinVersion's values, as the kubelet names them.
var tlsVersions = map[string]uint16{
	"VersionTLS10": tls.VersionTLS10, "VersionTLS11": tls.VersionTLS11,
	"VersionTLS12": tls.VersionTLS12, "VersionTLS13": tls.VersionTLS13,
}

// TLSMinVersion is tlsMinVersion as a crypto/tls version (TLS 1.2 when
// unset, Go's default for servers).
func (c *Config) TLSMinVersion() uint16 {
	if v, ok := tlsVersions[c.KubeletConfiguration.TLSMinVersion]; ok {
		return v
	}
	return tls.VersionTLS12
}

// TLSCipherSuites is tlsCipherSuites as crypto/tls IDs; nil: Go's
// defaults. Names are Go's (the kubelet's), secure or insecure.
func (c *Config) TLSCipherSuites() ([]uint16, error) {
	if len(c.KubeletConfiguration.TLSCipherSuites) == 0 {
		return nil, nil
	}
	known := map[string]uint16{}
	for _, s := range append(tls.CipherSuites(), tls.InsecureCipherSuites()...) {
		known[s.Name] = s.ID
	}
	var ids []uint16
	for _, name := range c.KubeletConfiguration.TLSCipherSuites {
		id, ok := known[name]
		if !ok {
			return nil, fmt.Errorf("tlsCipherSuites: invalid value %q: not a cipher suite Go knows, such as TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", name)
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// TLSCurves is tlsCurvePreferences as crypto/tls curve IDs; nil: Go's
// defaults. Go orders them itself, as the kubelet's doc says.
func (c *Config) TLSCurves() []tls.CurveID {
	var ids []tls.CurveID
	for _, v := range c.TLSCurvePreferences {
		ids = append(ids, tls.CurveID(v))
	}
	return ids
}

// WebhookAuthentication reports whether bearer tokens are checked with a
// TokenReview.
func (c *Config) WebhookAuthentication() bool {
	return c.Authentication.Webhook.Enabled == nil || *c.Authentication.Webhook.Enabled
}

// AnonymousAuthentication reports whether requests without credentials
// are served as system:anonymous (then authorized like any other user).
func (c *Config) AnonymousAuthentication() bool {
	return c.Authentication.Anonymous.Enabled != nil && *c.Authentication.Anonymous.Enabled
}

// validateServer checks the fields of the authenticated server on port.
func (c *Config) validateServer() []error {
	var errs []error
	bad := func(field string, value any, why string) {
		errs = append(errs, fmt.Errorf("%s: invalid value %q: %s", field, fmt.Sprint(value), why))
	}
	if c.Port < 1 || c.Port > 65535 {
		bad("port", c.Port, "must be between 1 and 65535")
	}
	if c.Port == c.ReadOnlyPort {
		bad("port", c.Port, "must differ from readOnlyPort")
	}
	if (c.TLSCertFile == "") != (c.TLSPrivateKeyFile == "") {
		bad("tlsPrivateKeyFile", c.TLSPrivateKeyFile, "tlsCertFile and tlsPrivateKeyFile are set together or not at all")
	}
	if v := c.KubeletConfiguration.TLSMinVersion; v != "" {
		if _, ok := tlsVersions[v]; !ok {
			bad("tlsMinVersion", v, "want one of "+strings.Join(slices.Sorted(maps.Keys(tlsVersions)), ", "))
		}
	}
	if _, err := c.TLSCipherSuites(); err != nil {
		errs = append(errs, err)
	}
	for i, v := range c.TLSCurvePreferences {
		// Go names the curves it knows; an unknown one prints as CurveID(n).
		if v < 0 || v > 0xffff || strings.HasPrefix(tls.CurveID(v).String(), "CurveID(") {
			bad(fmt.Sprintf("tlsCurvePreferences[%d]", i), v, "not a key exchange Go knows, such as 29 (X25519), 23 (P-256) or 4588 (X25519MLKEM768)")
		}
	}
	switch c.Authorization.Mode {
	case kubeletv1beta1.KubeletAuthorizationModeAlwaysAllow, kubeletv1beta1.KubeletAuthorizationModeWebhook:
	default:
		bad("authorization.mode", c.Authorization.Mode, "want AlwaysAllow or Webhook")
	}
	for field, d := range map[string]time.Duration{
		"authentication.webhook.cacheTTL":            c.Authentication.Webhook.CacheTTL.Duration,
		"authorization.webhook.cacheAuthorizedTTL":   c.Authorization.Webhook.CacheAuthorizedTTL.Duration,
		"authorization.webhook.cacheUnauthorizedTTL": c.Authorization.Webhook.CacheUnauthorizedTTL.Duration,
	} {
		if d < 0 {
			bad(field, d, "must be >= 0 (0: no cache)")
		}
	}
	return errs
}
