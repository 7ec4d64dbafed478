package server

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/utils/clock"
)

// User is who a request to the kubelet server comes from.
type User struct {
	Name   string
	UID    string
	Groups []string
	Extra  map[string][]string
}

const (
	anonymousUser      = "system:anonymous"
	unauthenticated    = "system:unauthenticated"
	authenticatedGroup = "system:authenticated"
)

// Reviews are the API server's answers the webhooks ask for: a
// TokenReview for a bearer token, a SubjectAccessReview for a request.
type Reviews interface {
	TokenReview(ctx context.Context, r *authenticationv1.TokenReview) (*authenticationv1.TokenReview, error)
	SubjectAccessReview(ctx context.Context, r *authorizationv1.SubjectAccessReview) (*authorizationv1.SubjectAccessReview, error)
}

// errBadCredentials is a credential that was presented and refused: the
// request gets 401 even when anonymous requests are allowed.
var errBadCredentials = errors.New("invalid credentials")

// Authenticator tells who a request comes from as the kubelet's
// delegating authenticator does: a client certificate signed by the
// client CA, else a bearer token the API server vouches for (TokenReview),
// else system:anonymous when allowed. Credentials that are presented and
// fail are refused, never downgraded to anonymous.
type Authenticator struct {
	// ClientCAs gives the CAs that verify client certificates; nil:
	// certificates are not looked at.
	ClientCAs func() *x509.CertPool
	// Reviews checks bearer tokens; nil: tokens are not accepted.
	Reviews   Reviews
	Anonymous bool
	// CacheTTL keeps a token's review (authenticated or not) this long,
	// as the kubelet's authentication.webhook.cacheTTL; a review that
	// failed (the API server did not answer) is not kept.
	CacheTTL time.Duration
	Clock    clock.PassiveClock

	// Refused tokens are kept apart: a flood of random ones cannot push
	// the working tokens out.
	tokens  ttlCache[User]
	refused ttlCache[struct{}]
	// flight asks once for a token many requests bring at the same time.
	flight singleflight.Group
}

// Authenticate returns the request's user, errBadCredentials for refused
// credentials, or another error when the API server could not be asked.
// As the API server's union of authenticators: a client certificate is
// tried when a client CA is configured, then a bearer token; the first
// that works wins. Anonymous only serves a request that presented
// nothing those authenticators could check: with anonymous on and no
// webhook, a bearer token is anonymous too.
func (a *Authenticator) Authenticate(r *http.Request) (User, error) {
	var failed error
	if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 && a.ClientCAs != nil {
		u, err := a.certificateUser(r.TLS.PeerCertificates)
		if err == nil {
			return u, nil
		}
		failed = err
	}
	// Without a webhook no token authenticator is in the chain: the
	// header is not looked at, as in the kubelet.
	if h := r.Header.Get("Authorization"); h != "" && a.Reviews != nil {
		scheme, token, _ := strings.Cut(h, " ")
		token = strings.TrimSpace(token)
		if !strings.EqualFold(scheme, "bearer") || token == "" {
			return User{}, errors.Join(failed, errBadCredentials)
		}
		u, err := a.tokenUser(r.Context(), token)
		if err == nil {
			return u, nil
		}
		return User{}, errors.Join(failed, err)
	}
	if failed != nil {
		return User{}, failed
	}
	if a.Anonymous {
		return User{Name: anonymousUser, Groups: []string{unauthenticated}}, nil
	}
	return User{}, errBadCredentials
}

// certificateUser is the certificate's subject: the common name is the
// user, each organization a group (the API server's x509 mapping).
func (a *Authenticator) certificateUser(chain []*x509.Certificate) (User, error) {
	roots := a.ClientCAs()
	if roots == nil {
		return User{}, errBadCredentials
	}
	inter := x509.NewCertPool()
	for _, c := range chain[1:] {
		inter.AddCert(c)
	}
	leaf := chain[0]
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, CurrentTime: a.Clock.Now()}); err != nil {
		return User{}, fmt.Errorf("%w: client certificate: %v", errBadCredentials, err)
	}
	if leaf.Subject.CommonName == "" {
		return User{}, fmt.Errorf("%w: client certificate without a common name", errBadCredentials)
	}
	return User{Name: leaf.Subject.CommonName, Groups: append(append([]string{}, leaf.Subject.Organization...), authenticatedGroup)}, nil
}

func (a *Authenticator) tokenUser(ctx context.Context, token string) (User, error) {
	if a.Reviews == nil {
		return User{}, errBadCredentials
	}
	// The caches hold a hash: the tokens themselves stay out of memory.
	sum := sha256.Sum256([]byte(token))
	key := string(sum[:])
	now := a.Clock.Now()
	if u, ok := a.tokens.get(key, now); ok {
		return u, nil
	}
	if _, ok := a.refused.get(key, now); ok {
		return User{}, errBadCredentials
	}
	// One review for every request that brings this token meanwhile; it
	// outlives the request that started it, as the kubelet's does.
	res := a.flight.DoChan(key, func() (any, error) {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), reviewTimeout)
		defer cancel()
		rev, err := a.Reviews.TokenReview(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}})
		if err != nil {
			return nil, fmt.Errorf("token review: %w", err)
		}
		if !rev.Status.Authenticated {
			a.refused.put(key, struct{}{}, a.Clock.Now(), a.CacheTTL)
			return nil, errBadCredentials
		}
		u := rev.Status.User
		user := User{Name: u.Username, UID: u.UID, Groups: append(append([]string{}, u.Groups...), authenticatedGroup)}
		if len(u.Extra) > 0 {
			user.Extra = map[string][]string{}
			for k, v := range u.Extra {
				user.Extra[k] = v
			}
		}
		a.tokens.put(key, user, a.Clock.Now(), a.CacheTTL)
		return user, nil
	})
	select {
	case r := <-res:
		if r.Err != nil {
			return User{}, r.Err
		}
		return r.Val.(User), nil
	case <-ctx.Done():
		return User{}, fmt.Errorf("token review: %w", ctx.Err())
	}
}

// reviewTimeout bounds one TokenReview or SubjectAccessReview.
const reviewTimeout = 10 * time.Second

// Attributes are what a request asks of the node, in the API's terms:
// verb on nodes/<subresource> named the node.
type Attributes struct {
	User        User
	Verb        string
	Node        string
	Subresource string
}

// Authorizer decides whether a user may do what a request asks.
type Authorizer interface {
	Authorize(ctx context.Context, a Attributes) (allowed bool, err error)
}

// AlwaysAllow lets every authenticated request through (authorization
// mode AlwaysAllow).
type AlwaysAllow struct{}

func (AlwaysAllow) Authorize(context.Context, Attributes) (bool, error) { return true, nil }

// WebhookAuthorizer asks the API server with a SubjectAccessReview and
// keeps its answers: allowed ones for AllowedTTL, denied ones for
// DeniedTTL (the kubelet's 5 m and 30 s).
type WebhookAuthorizer struct {
	Reviews               Reviews
	AllowedTTL, DeniedTTL time.Duration
	Clock                 clock.PassiveClock

	answers ttlCache[bool]
}

func (w *WebhookAuthorizer) Authorize(ctx context.Context, a Attributes) (bool, error) {
	key := fmt.Sprintf("%q %q %q %v %s %s %s", a.User.Name, a.User.UID, a.User.Groups, a.User.Extra, a.Verb, a.Node, a.Subresource)
	if allowed, ok := w.answers.get(key, w.Clock.Now()); ok {
		return allowed, nil
	}
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: a.User.Name, UID: a.User.UID, Groups: a.User.Groups,
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Verb: a.Verb, Version: "v1", Resource: "nodes", Subresource: a.Subresource, Name: a.Node,
		},
	}}
	if len(a.User.Extra) > 0 {
		sar.Spec.Extra = map[string]authorizationv1.ExtraValue{}
		for k, v := range a.User.Extra {
			sar.Spec.Extra[k] = v
		}
	}
	ctx, cancel := context.WithTimeout(ctx, reviewTimeout)
	defer cancel()
	got, err := w.Reviews.SubjectAccessReview(ctx, sar)
	if err != nil {
		return false, err
	}
	ttl := w.DeniedTTL
	if got.Status.Allowed {
		ttl = w.AllowedTTL
	}
	w.answers.put(key, got.Status.Allowed, w.Clock.Now(), ttl)
	return got.Status.Allowed, nil
}

// verbs maps HTTP methods to the API's verbs, as the kubelet does.
var verbs = map[string]string{
	http.MethodGet: "get", http.MethodHead: "get", http.MethodPost: "create",
	http.MethodPut: "update", http.MethodPatch: "patch", http.MethodDelete: "delete",
}

// subresources are the node subresources a path is authorized as, in the
// order they are tried: the kubelet's mapping, with its fine-grained
// subresources (KubeletFineGrainedAuthz, on by default since 1.33) for
// /pods, /healthz and /configz falling back to proxy.
func subresources(path string) []string {
	under := func(prefix string) bool { return path == prefix || strings.HasPrefix(path, prefix+"/") }
	switch {
	case under("/stats"):
		return []string{"stats"}
	case under("/metrics"):
		return []string{"metrics"}
	case under("/logs"):
		return []string{"log"}
	case under("/spec"):
		return []string{"spec"}
	case under("/checkpoint"):
		return []string{"checkpoint"}
	case under("/pods"):
		return []string{"pods", "proxy"}
	case under("/healthz"):
		return []string{"healthz", "proxy"}
	case under("/configz"):
		return []string{"configz", "proxy"}
	}
	return []string{"proxy"}
}

// Guard wraps the kubelet server's handler with authentication and
// authorization. Refusals are answered in the kubelet's words and logged
// with the user's name, never a credential.
func Guard(next http.Handler, node string, authn *Authenticator, authz Authorizer, log *slog.Logger) http.Handler {
	// Anyone can make the reviews fail (a flood of tokens meets the review
	// client's rate limit): their errors are logged sparsely.
	authnErrors := &sparseLog{period: 10 * time.Second}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, err := authn.Authenticate(r)
		if err != nil {
			if !errors.Is(err, errBadCredentials) {
				if ok, dropped := authnErrors.allow(authn.Clock.Now()); ok {
					log.Error("unable to authenticate the request due to an error", "path", r.URL.Path, "remote", r.RemoteAddr, "err", err, "similar_errors_not_logged", dropped)
				}
			} else {
				log.Debug("unauthorized", "path", r.URL.Path, "remote", r.RemoteAddr, "err", err)
			}
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		verb := verbs[r.Method]
		subs := subresources(r.URL.Path)
		for _, sub := range subs {
			allowed, err := authz.Authorize(r.Context(), Attributes{User: user, Verb: verb, Node: node, Subresource: sub})
			if err != nil {
				log.Error("authorization error", "user", user.Name, "verb", verb, "resource", "nodes", "subresource", sub, "err", err)
				http.Error(w, fmt.Sprintf("Authorization error (user=%s, verb=%s, resource=nodes, subresource=%s)", user.Name, verb, sub), http.StatusInternalServerError)
				return
			}
			if allowed {
				next.ServeHTTP(w, r)
				return
			}
		}
		// Debug, as the kubelet's V(2): a client retrying must not flood the log.
		log.Debug("forbidden", "user", user.Name, "verb", verb, "resource", "nodes", "subresources", subs, "path", r.URL.Path)
		http.Error(w, fmt.Sprintf("Forbidden (user=%s, verb=%s, resource=nodes, subresource(s)=%v)", user.Name, verb, subs), http.StatusForbidden)
	})
}

// ttlCache keeps answers until they expire; it drops expired ones as it
// grows, so a flood of distinct tokens cannot grow it past maxCached.
type ttlCache[V any] struct {
	mu      sync.Mutex
	entries map[string]cached[V]
}

type cached[V any] struct {
	v       V
	expires time.Time
}

const maxCached = 4096

func (c *ttlCache[V]) get(key string, now time.Time) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[key]
	if !ok || !now.Before(e.expires) {
		var zero V
		return zero, false
	}
	return e.v, true
}

func (c *ttlCache[V]) put(key string, v V, now time.Time, ttl time.Duration) {
	if ttl <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil {
		c.entries = map[string]cached[V]{}
	}
	if len(c.entries) >= maxCached {
		for k, e := range c.entries {
			if !now.Before(e.expires) {
				delete(c.entries, k)
			}
		}
		for k := range c.entries { // still full: make room at random
			if len(c.entries) < maxCached {
				break
			}
			delete(c.entries, k)
		}
	}
	c.entries[key] = cached[V]{v, now.Add(ttl)}
}

// sparseLog lets one message of a kind through per period and counts the
// ones it held back.
type sparseLog struct {
	period time.Duration

	mu      sync.Mutex
	last    time.Time
	dropped int
}

// allow reports whether to log now, and how many were held back since
// the last one logged.
func (s *sparseLog) allow(now time.Time) (bool, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.last.IsZero() && now.Sub(s.last) < s.period {
		s.dropped++
		return false, 0
	}
	dropped := s.dropped
	s.last, s.dropped = now, 0
	return true, dropped
}
